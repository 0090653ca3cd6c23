"""Where a household policy first leaves the expert's path, and how: per game, the first turn whose
action is not the one the gateway's expert would play from the same history.

Reads the trajectories `turnopd eval --trajectories FILE` wrote. The expert (the same
``HouseholdExpert`` that wrote the training demonstrations) is replayed on the objective, the opening
room description and every accepted (action, observation) pair the policy saw; at each turn its
choice is compared with the policy's. The first difference is named by the two verbs, expert first
(``take->go``: it walked past a target it should have taken; ``go->take``: it took something the
expert would not; ``rejected``: the game refused the action). Prints, for won and lost games, how
many first left the path and how, and the median turn of that first step off it.

    turnopd eval --model teacher-remind --config configs/teachers/teacher_alfworld_reminder.toml \\
        --episodes 60 --n 1 --temperature 0 --trajectories greedy.jsonl
    python scripts/first_mistake.py greedy.jsonl --model teacher-remind
"""

import statistics
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from services.diagnostics.trajectory_args import games_and_decoder
from services.envs.alfworld.expert import HouseholdExpert

ADMISSIBLE = "\nAdmissible actions: "
TASK = "Your task is to: "
USER = "<|im_start|>user\n"


def opening(prompt: str) -> tuple[str, str, list[str]]:
    """(objective, room description, admissible actions) of the first user message of a prompt."""
    message = prompt.split(USER, 1)[1].split("<|im_end|>", 1)[0]
    text, _, admissible = message.partition(ADMISSIBLE)
    intro, _, objective = text.rpartition(TASK)
    return objective.strip(), intro.strip(), _actions(admissible)


def _actions(listing: str) -> list[str]:
    return [a.strip() for a in listing.split("\n", 1)[0].rstrip(".").split(", ") if a.strip()]


def _verb(action: str | None) -> str:
    return "none" if action is None else action.split(" ", 1)[0]


def first_mistake(game: dict[str, Any], decode: Callable[[list[int]], str]) -> tuple[int, str] | None:
    """(turn index, how) of the first step off the expert's path; None when the game never left it."""
    turns = game["turns"]
    if not turns:
        return None
    objective, intro, admissible = opening(decode(game["token_ids"][: turns[0]["response_start"]]))
    expert = HouseholdExpert(objective, intro)
    for turn in turns:
        wanted = expert.next_action(admissible)
        if not turn["accepted"]:
            return turn["index"], "rejected"
        if turn["action"] != wanted:
            return turn["index"], f"{_verb(wanted)}->{_verb(turn['action'])}"
        observation, _, listing = turn["observation"].partition(ADMISSIBLE)
        expert.observe(turn["action"], observation)
        admissible = _actions(listing)
    return None


def mistake_rows(
    games: Iterable[dict[str, Any]], decode: Callable[[list[int]], str]
) -> dict[bool, tuple[int, Counter[str], list[int]]]:
    """Won (True) and lost (False): (games, Counter of how the first step off the path went, the
    turn indices of those first steps)."""
    rows: dict[bool, tuple[int, Counter[str], list[int]]] = {}
    for game in games:
        count, kinds, indices = rows.get(bool(game["success"]), (0, Counter(), []))
        found = first_mistake(game, decode)
        if found is None:
            kinds["never"] += 1
        else:
            kinds[found[1]] += 1
            indices.append(found[0])
        rows[bool(game["success"])] = (count + 1, kinds, indices)
    return rows


def main() -> None:
    games, decode = games_and_decoder(__doc__.splitlines()[0])
    rows = mistake_rows(games, decode)
    for won, (count, kinds, indices) in sorted(rows.items()):
        median = f"{statistics.median(indices):g}" if indices else "-"
        ways = ", ".join(f"{how} {n}" for how, n in kinds.most_common())
        print(
            f"{'won' if won else 'lost'}: {count} games; first step off the path at median turn {median}: {ways}"
        )


if __name__ == "__main__":
    main()
