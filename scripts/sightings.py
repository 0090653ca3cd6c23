"""Whether a household policy perceives its targets: missed and false sightings, in won and lost games.

Reads the trajectories `turnopd eval --trajectories FILE` wrote and decodes each response with the
model's tokenizer. The target kinds come from the goal at the head of the first thought (``put pen
in drawer 1.`` -> pen; ``look at cd under desklamp 1.`` -> cd and desklamp). A *missed sighting*: an
arrival or opening observation shows a target (``On the shelf 1, you see a bowl 1, and a pen 1.``)
while the agent holds nothing and the next thought's ``seen:`` does not name it (nor holds it). A *false sighting*: a thought's
``seen:`` names an object of another kind. Prints one row per task type, then the missed sightings
by the entity's number (1 or higher: with the zoo tokenizer every ``pen 2`` is its own token).

    turnopd eval --model teacher-remind --config configs/teachers/teacher_alfworld_reminder.toml \\
        --episodes 60 --n 1 --temperature 0 --trajectories greedy.jsonl
    python scripts/sightings.py greedy.jsonl --model teacher-remind
"""

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from services.diagnostics.trajectory_args import games_and_decoder

THOUGHT = re.compile(r"<think>\s*(.*?)\s*</think>", re.S)
GOALS = (
    re.compile(r"^put two (\w+) in "),
    re.compile(r"^look at (\w+) under (\w+)"),
    re.compile(r"^\w+ (\w+) with \w+ \d+, put in "),
    re.compile(r"^put (\w+) in "),
)
SHOWN = re.compile(r"\ban? (\w+ \d+)")
SEEN = re.compile(r"seen: (.*?)\. at: ")
HOLDING = re.compile(r"holding: (.*?)\. seen: ")


def target_kinds(goal_thought: str) -> set[str]:
    """The object kinds a thought's goal asks to find (empty when the head does not parse)."""
    for pattern in GOALS:
        if (match := pattern.search(goal_thought)) is not None:
            return set(match.groups())
    return set()


def _seen_objects(thought: str) -> list[str]:
    match = SEEN.search(thought)
    if match is None or match.group(1) == "none":
        return []
    return [entry.split(" in ")[0].strip() for entry in match.group(1).split(", ")]


def game_sightings(
    game: dict[str, Any], decode: Callable[[list[int]], str]
) -> tuple[list[str], list[str], list[str]]:
    """The targets a game's observations showed (holding nothing), those its thoughts missed, and
    the non-targets they claimed as seen."""
    thoughts = []
    for turn in game["turns"]:
        match = THOUGHT.search(decode(game["token_ids"][turn["response_start"] : turn["response_end"]]))
        thoughts.append(match.group(1) if match else "")
    kinds = target_kinds(thoughts[0]) if thoughts else set()
    shown: list[str] = []
    missed: list[str] = []
    false: list[str] = []
    for turn, following in zip(game["turns"], thoughts[1:], strict=False):
        shown_text = turn["observation"].split("\nAdmissible actions:")[0]
        held = HOLDING.search(following)
        holding = held.group(1).split(",")[0] if held else "nothing"
        if turn["accepted"] and "you see" in shown_text and holding == "nothing":
            targets = [o for o in SHOWN.findall(shown_text) if o.rsplit(" ", 1)[0] in kinds]
            shown += targets
            missed += [o for o in targets if o not in set(_seen_objects(following))]
    for thought in thoughts:
        false += [o for o in _seen_objects(thought) if o.rsplit(" ", 1)[0] not in kinds]
    return shown, missed, false


def _number(name: str) -> str:
    return "1" if name.endswith(" 1") else "2+"


def sighting_rows(
    games: Iterable[dict[str, Any]], decode: Callable[[list[int]], str]
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Per task type: [games, lost, lost+missed, won+missed, lost+false, won+false]; and per entity
    number ('1' or '2+'): [targets shown, missed]."""
    rows: dict[str, list[int]] = defaultdict(lambda: [0] * 6)
    numbers: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for game in games:
        shown, missed, false = game_sightings(game, decode)
        won = bool(game["success"])
        row = rows[game["task_type"]]
        row[0] += 1
        row[1] += not won
        row[3 if won else 2] += bool(missed)
        row[5 if won else 4] += bool(false)
        for name in shown:
            numbers[_number(name)][0] += 1
        for name in missed:
            numbers[_number(name)][1] += 1
    return dict(rows), dict(numbers)


def main() -> None:
    games, decode = games_and_decoder(__doc__.splitlines()[0])
    rows, numbers = sighting_rows(games, decode)
    print(f"{'task type':28s} games  lost  lost+missed  won+missed  lost+false  won+false")
    for name, row in [*sorted(rows.items()), ("all", [sum(r[i] for r in rows.values()) for i in range(6)])]:
        print(f"{name:28s} {row[0]:5d} {row[1]:5d} {row[2]:12d} {row[3]:11d} {row[4]:11d} {row[5]:10d}")
    for number, (shown, missed) in sorted(numbers.items()):
        print(f"targets numbered {number}: {shown} shown, {missed} missed ({missed / max(shown, 1):.0%})")


if __name__ == "__main__":
    main()
