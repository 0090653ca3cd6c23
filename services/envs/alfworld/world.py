"""A generated household room and its PDDL problem for ALFWorld's domain.

PDDL ids are lower case (Fast Downward lower-cases them anyway) and zero-padded, so TextWorld,
which lists entities sorted by id, lists them in numeric order: `cabinet_01` is shown as
`cabinet 1`. Every receptacle stands at its own location; the agent starts at `loc_00`, the
middle of the room.
"""

from dataclasses import dataclass

from services.envs.alfworld.alfred_assets import (
    CLEANABLE_TYPES,
    COOLABLE_TYPES,
    HEATABLE_TYPES,
    LAMP_TYPES,
    OPENABLE_TYPES,
    can_contain,
)
from services.envs.alfworld.tasks import HouseholdGoal, goal_pddl

AGENT_ID = "agent1"
START_LOCATION = "loc_00"


@dataclass(frozen=True)
class Receptacle:
    id: str  # e.g. 'cabinet_02'
    type: str  # ALFRED type, e.g. 'Cabinet'
    location: str

    @property
    def openable(self) -> bool:
        return self.type in OPENABLE_TYPES


@dataclass(frozen=True)
class Thing:
    id: str  # e.g. 'apple_01'
    type: str  # ALFRED type, e.g. 'Apple'
    receptacle: str  # id of the receptacle it starts in


@dataclass(frozen=True)
class HouseholdWorld:
    """Everything needed to write the game: scene, goal, receptacles, and objects."""

    scene: int
    task_type: str
    goal_types: tuple[str, str | None, str | None]  # ALFRED types: (object, receptacle, toggle)
    goal: HouseholdGoal
    objective: str  # without the final period
    receptacles: tuple[Receptacle, ...]
    things: tuple[Thing, ...]


def entity_id(alfred_type: str, number: int) -> str:
    """PDDL id of the ``number``-th instance of a type: ('SinkBasin', 1) -> 'sinkbasin_01'."""
    return f"{alfred_type.lower()}_{number:02d}"


def display_name(pddl_id: str) -> str:
    """What the game shows for an id: 'sinkbasin_01' -> 'sinkbasin 1'."""
    base, _, number = pddl_id.rpartition("_")
    return f"{base} {int(number)}"


def render_problem(world: HouseholdWorld, problem_name: str) -> str:
    """The PDDL problem text of ``world`` (objects, initial facts, ALFWorld's goal)."""
    obj_type, recep_type, toggle_type = world.goal_types
    otypes = sorted({t.type for t in world.things})
    rtypes = sorted({r.type for r in world.receptacles})
    locations = [START_LOCATION, *(r.location for r in world.receptacles)]
    # The goal names types that may be absent from the room (e.g. no lamp): declare them anyway.
    extra_otypes = sorted({t for t in (obj_type, toggle_type) if t is not None} - set(otypes))
    extra_rtypes = sorted({recep_type} - set(rtypes) - {None}) if recep_type else []
    objects = [f"{AGENT_ID} - agent"]
    objects += [f"{loc} - location" for loc in locations]
    objects += [f"{r.id} - receptacle" for r in world.receptacles]
    objects += [f"{t.id} - object" for t in world.things]
    objects += [f"{name}Type - otype" for name in [*otypes, *extra_otypes]]
    objects += [f"{name}Type - rtype" for name in [*rtypes, *extra_rtypes]]

    location_of = {r.id: r.location for r in world.receptacles}
    init = [f"(atLocation {AGENT_ID} {START_LOCATION})"]
    for r in world.receptacles:
        init.append(f"(receptacleType {r.id} {r.type}Type)")
        init.append(f"(receptacleAtLocation {r.id} {r.location})")
        if r.openable:
            init.append(f"(openable {r.id})")
    for t in world.things:
        init.append(f"(objectType {t.id} {t.type}Type)")
        init.append(f"(inReceptacle {t.id} {t.receptacle})")
        init.append(f"(objectAtLocation {t.id} {location_of[t.receptacle]})")
        init.extend(_affordances(t))
    for rtype in rtypes:
        init.extend(f"(canContain {rtype}Type {otype}Type)" for otype in otypes if can_contain(rtype, otype))

    lines = [f"(define (problem {problem_name})", "  (:domain alfred)", "  (:objects"]
    lines += [f"    {o}" for o in objects]
    lines += ["  )", "  (:init"]
    lines += [f"    {fact}" for fact in init]
    lines += ["  )"]
    return "\n".join(lines) + "\n" + goal_pddl(world.task_type, obj_type, recep_type, toggle_type)


def _affordances(thing: Thing) -> list[str]:
    if thing.type in LAMP_TYPES:
        return [f"(toggleable {thing.id})"]
    facts = [f"(pickupable {thing.id})"]
    for affordance, types in (
        ("cleanable", CLEANABLE_TYPES),
        ("heatable", HEATABLE_TYPES),
        ("coolable", COOLABLE_TYPES),
    ):
        if thing.type in types:
            facts.append(f"({affordance} {thing.id})")
    return facts
