"""How often a household policy's restated goal drifts, in won and in lost games.

Reads the trajectories `turnopd eval --trajectories FILE` wrote and decodes each response with the
model's tokenizer; a game *drifts* when the goal at the head of some thought (``put apple in
drawer 1. holding: ...``) differs from its first thought's. Prints one row per task type.

    turnopd eval --model teacher-recovery --episodes 60 --n 1 --trajectories games.jsonl
    python scripts/goal_drift.py games.jsonl --model teacher-recovery
"""

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from services.diagnostics.trajectory_args import games_and_decoder

GOAL = re.compile(r"<think>\s*(.*?)\. holding:")


def drift_rows(games: Iterable[dict[str, Any]], decode: Callable[[list[int]], str]) -> dict[str, list[int]]:
    """Per task type: [games, lost, lost games that drift, won games that drift]."""
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for game in games:
        goals = []
        for turn in game["turns"]:
            text = decode(game["token_ids"][turn["response_start"] : turn["response_end"]])
            if (match := GOAL.search(text)) is not None:
                goals.append(match.group(1))
        drift = any(goal != goals[0] for goal in goals)
        row = rows[game["task_type"]]
        row[0] += 1
        row[1] += not game["success"]
        row[2 if not game["success"] else 3] += drift
    return dict(rows)


def main() -> None:
    games, decode = games_and_decoder(__doc__.splitlines()[0])
    rows = drift_rows(games, decode)
    print(f"{'task type':28s} games  lost  lost+drift  won+drift")
    for name, (total_games, lost, lost_drift, won_drift) in sorted(rows.items()):
        print(f"{name:28s} {total_games:5d} {lost:5d} {lost_drift:11d} {won_drift:10d}")
    total = [sum(row[i] for row in rows.values()) for i in range(4)]
    print(f"{'all':28s} {total[0]:5d} {total[1]:5d} {total[2]:11d} {total[3]:10d}")


if __name__ == "__main__":
    main()
