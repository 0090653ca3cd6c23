"""The six household task types: their ALFWorld goal (PDDL), objective templates, and the parser
that turns an objective sentence back into a structured goal (the expert reads only the text)."""

import re
from dataclasses import dataclass

from alfworld.gen import goal_library

from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES

# Our task-type names (the paper's) -> ALFWorld's goal names (goal_library / traj_data.json).
ALFRED_GOAL_NAMES: dict[str, str] = {
    "pick_and_place": "pick_and_place_simple",
    "pick_clean_then_place": "pick_clean_then_place_in_recep",
    "pick_heat_then_place": "pick_heat_then_place_in_recep",
    "pick_cool_then_place": "pick_cool_then_place_in_recep",
    "look_at_obj_in_light": "look_at_obj_in_light",
    "pick_two_obj_and_place": "pick_two_obj_and_place",
}
TASK_TYPE_BY_ALFRED_NAME = {alfred: ours for ours, alfred in ALFRED_GOAL_NAMES.items()}
assert tuple(ALFRED_GOAL_NAMES) == HOUSEHOLD_TASK_TYPES

# The appliance that changes the object's state, by task type, and the verb that uses it.
APPLIANCES: dict[str, tuple[str, str]] = {
    "pick_clean_then_place": ("SinkBasin", "clean"),
    "pick_heat_then_place": ("Microwave", "heat"),
    "pick_cool_then_place": ("Fridge", "cool"),
}
# ALFRED's room types per goal (constants.GOALS_VALID), keyed by our names.
ROOM_TYPES: dict[str, frozenset[str]] = {
    "pick_and_place": frozenset({"Kitchen", "LivingRoom", "Bathroom", "Bedroom"}),
    "pick_clean_then_place": frozenset({"Kitchen", "Bathroom"}),
    "pick_heat_then_place": frozenset({"Kitchen"}),
    "pick_cool_then_place": frozenset({"Kitchen"}),
    "look_at_obj_in_light": frozenset({"LivingRoom", "Bedroom"}),
    "pick_two_obj_and_place": frozenset({"Kitchen", "LivingRoom", "Bathroom", "Bedroom"}),
}

_WORD = r"([a-z]+)"
# Objective patterns of ALFWorld's templates (goal_library), most specific first.
_OBJECTIVE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (task_type, re.compile("^" + pattern.format(obj=_WORD, recep=_WORD, toggle=_WORD) + r"\.?$"))
    for task_type, pattern in (
        ("pick_clean_then_place", "put a clean {obj} in {recep}"),
        ("pick_clean_then_place", "clean some {obj} and put it in {recep}"),
        ("pick_heat_then_place", "put a hot {obj} in {recep}"),
        ("pick_heat_then_place", "heat some {obj} and put it in {recep}"),
        ("pick_cool_then_place", "put a cool {obj} in {recep}"),
        ("pick_cool_then_place", "cool some {obj} and put it in {recep}"),
        ("pick_two_obj_and_place", "put two {obj} in {recep}"),
        ("pick_two_obj_and_place", "find two {obj} and put them in {recep}"),
        ("look_at_obj_in_light", "look at {obj} under the {toggle}"),
        ("look_at_obj_in_light", "examine the {obj} with the {toggle}"),
        ("pick_and_place", "put a {obj} in {recep}"),
        ("pick_and_place", "put some {obj} on {recep}"),
    )
)


@dataclass(frozen=True)
class HouseholdGoal:
    """A task instance: object type to move (lower case, e.g. 'apple') and where, or which lamp."""

    task_type: str
    obj: str
    recep: str | None = None
    toggle: str | None = None


def check_task_type(task_type: str) -> str:
    """Return ``task_type`` if it is one of the six, else raise ValueError naming them."""
    if task_type not in ALFRED_GOAL_NAMES:
        raise ValueError(f"unknown household task type {task_type!r}; known: {list(HOUSEHOLD_TASK_TYPES)}")
    return task_type


def objective_templates(task_type: str) -> list[str]:
    """ALFWorld's objective templates for a task type (format keys: obj, recep, toggle)."""
    templates: list[str] = goal_library.gdict[ALFRED_GOAL_NAMES[check_task_type(task_type)]]["templates"]
    return list(templates)


def goal_pddl(task_type: str, obj_type: str, recep_type: str | None, toggle_type: str | None) -> str:
    """ALFWorld's PDDL goal for the task, with CamelCase ALFRED types; ends with the problem's ')'."""
    template: str = goal_library.gdict[ALFRED_GOAL_NAMES[check_task_type(task_type)]]["pddl"]
    # goal_library writes typed variables as '?x # type' (ALFRED replaces '#' before planning).
    return template.format(obj=obj_type, recep=recep_type or "", toggle=toggle_type or "").replace(
        " # ", " - "
    )


def parse_objective(objective: str) -> HouseholdGoal | None:
    """Structured goal of an ALFWorld objective sentence, or None for free-form (human) text."""
    text = " ".join(objective.strip().lower().split())
    text = text.removeprefix("your task is to: ")
    for task_type, pattern in _OBJECTIVE_PATTERNS:
        match = pattern.match(text)
        if match is None:
            continue
        if task_type == "look_at_obj_in_light":
            return HouseholdGoal(task_type, obj=match.group(1), toggle=match.group(2))
        return HouseholdGoal(task_type, obj=match.group(1), recep=match.group(2))
    return None
