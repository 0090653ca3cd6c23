"""ALFWorld's own assets, read from the installed `alfworld` package: PDDL domain, text grammar,
scene layouts (which receptacles and objects each FloorPlan has) and object affordances.

Scene splits follow ALFRED: train scenes are FloorPlan 7-30 of each room type, the unseen
scenes FloorPlan 1-6, so `valid_unseen` games never share a layout with `train` games.
"""

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from alfworld.gen import constants as alfred_constants

from services.errors import ConfigError

OPENABLE_TYPES = frozenset(alfred_constants.OPENABLE_CLASS_SET)
CLEANABLE_TYPES = frozenset(alfred_constants.VAL_ACTION_OBJECTS["Cleanable"])
HEATABLE_TYPES = frozenset(alfred_constants.VAL_ACTION_OBJECTS["Heatable"])
COOLABLE_TYPES = frozenset(alfred_constants.VAL_ACTION_OBJECTS["Coolable"])
LAMP_TYPES = ("DeskLamp", "FloorLamp")
# Furniture a lamp may stand on in a generated room (ALFWorld lamps sit on tables and dressers).
LAMP_HOST_TYPES = frozenset({"SideTable", "Desk", "Dresser", "Shelf", "DiningTable", "CoffeeTable"})
# Receptacles that hold things; portable ones (bowl, mug, ...) are treated as plain objects, as in
# ALFWorld's TextWorld games where the receptacle-object actions are disabled.
STATIC_RECEPTACLE_TYPES = frozenset(
    set(alfred_constants.VAL_RECEPTACLE_OBJECTS) - set(alfred_constants.MOVABLE_RECEPTACLES)
)
# Sliced variants only exist after slicing, which the six task types never need.
PICKUPABLE_TYPES = frozenset(
    obj
    for contents in alfred_constants.VAL_RECEPTACLE_OBJECTS.values()
    for obj in contents
    if not obj.endswith("Sliced")
)
ROOM_TYPE_RANGES = {room: range(r.start, r.stop) for room, r in alfred_constants.SCENE_TYPE.items()}


@dataclass(frozen=True)
class Scene:
    """One ALFRED FloorPlan: its receptacle instances per type and the object types it contains."""

    number: int
    room_type: str
    receptacle_counts: dict[str, int]
    object_types: frozenset[str]


def alfworld_package_dir() -> Path:
    """Directory of the installed `alfworld` package."""
    return Path(str(resources.files("alfworld")))


@cache
def alfred_domain() -> str:
    """ALFWorld's PDDL domain (`alfworld/data/alfred.pddl`)."""
    return _read_asset("data/alfred.pddl")


@cache
def alfred_grammar() -> str:
    """ALFWorld's TextWorld grammar (`alfworld/data/alfred.twl2`), unmodified."""
    return _read_asset("data/alfred.twl2")


def _read_asset(relative: str) -> str:
    path = alfworld_package_dir() / relative
    try:
        return path.read_text()
    except OSError as exc:
        raise ConfigError(
            f"the alfworld package lacks {relative} ({exc.strerror}); reinstall alfworld"
        ) from None


def can_contain(receptacle_type: str, object_type: str) -> bool:
    """ALFWorld's affordance table: may ``object_type`` be put in/on ``receptacle_type``?"""
    return object_type in alfred_constants.VAL_RECEPTACLE_OBJECTS.get(receptacle_type, ())


def scene_numbers(split: str) -> list[int]:
    """FloorPlan numbers of a split: `train` -> ALFRED train scenes, `valid_unseen` -> unseen ones."""
    match split:
        case "train":
            return list(alfred_constants.TRAIN_SCENE_NUMBERS)
        case "valid_unseen":
            return list(alfred_constants.TEST_SCENE_NUMBERS)
        case _:
            raise ValueError(f"unknown split {split!r}")


def room_type(scene_number: int) -> str:
    """Kitchen, LivingRoom, Bedroom or Bathroom."""
    for room, numbers in ROOM_TYPE_RANGES.items():
        if scene_number in numbers:
            return room
    raise ValueError(f"FloorPlan{scene_number} is not an ALFRED scene")


@cache
def load_scene(scene_number: int) -> Scene:
    """Read a FloorPlan's layout files; receptacles found only in the object list count once."""
    layouts = alfworld_package_dir() / "gen" / "layouts"
    try:
        placements = json.loads((layouts / f"FloorPlan{scene_number}-openable.json").read_text())
        present = json.loads((layouts / f"FloorPlan{scene_number}-objects.json").read_text())
    except OSError as exc:
        raise ConfigError(f"missing ALFWorld layout for FloorPlan{scene_number}: {exc.strerror}") from None
    counts: dict[str, int] = {}
    for object_id in placements:
        parts = object_id.split("|")
        # Sinks and bathtubs are listed as 'Sink|x|y|z|SinkBasin': the basin is the receptacle.
        rtype = parts[-1] if len(parts) == 5 else parts[0]
        if rtype in STATIC_RECEPTACLE_TYPES:
            counts[rtype] = counts.get(rtype, 0) + 1
    for name in present:
        if name in STATIC_RECEPTACLE_TYPES and name not in counts:
            counts[name] = 1
    objects = frozenset(name for name in present if name in PICKUPABLE_TYPES or name in LAMP_TYPES)
    return Scene(scene_number, room_type(scene_number), dict(sorted(counts.items())), objects)
