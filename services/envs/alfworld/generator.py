"""Seeded, offline generation of ALFWorld-style household games.

A game is a function of (split, task type, index) and the size limits only: the split picks the
scene pool (ALFRED's train or unseen FloorPlans), the seed derived from all three picks a scene,
a feasible goal, a subset of the scene's receptacles (always including the ones the goal needs)
and where the target, the lamp and some distractor objects start. Targets never start in a
receptacle of the goal's type, so no game is won before its first step.
"""

import hashlib
import random
from dataclasses import dataclass
from typing import Any

from services.envs.alfworld.alfred_assets import (
    CLEANABLE_TYPES,
    COOLABLE_TYPES,
    HEATABLE_TYPES,
    LAMP_HOST_TYPES,
    LAMP_TYPES,
    Scene,
    alfred_domain,
    can_contain,
    load_scene,
    room_type,
    scene_numbers,
)
from services.envs.alfworld.grammar import household_grammar
from services.envs.alfworld.tasks import (
    APPLIANCES,
    ROOM_TYPES,
    HouseholdGoal,
    check_task_type,
    objective_templates,
)
from services.envs.alfworld.world import (
    HouseholdWorld,
    Receptacle,
    Thing,
    entity_id,
    render_problem,
)
from services.errors import ConfigError

GENERATOR_VERSION = 1
_STATE_TYPES = {"SinkBasin": CLEANABLE_TYPES, "Microwave": HEATABLE_TYPES, "Fridge": COOLABLE_TYPES}


@dataclass(frozen=True)
class GenerationParams:
    """Size limits of a generated room (they change the games, so they key the cache)."""

    max_receptacles: int = 8
    max_distractors: int = 6
    max_targets: int = 2

    def cache_key(self) -> str:
        return f"v{GENERATOR_VERSION}-r{self.max_receptacles}-d{self.max_distractors}-t{self.max_targets}"


@dataclass(frozen=True)
class _GoalChoice:
    obj: str
    recep: str | None
    toggle: str | None
    appliance: str | None
    source_types: tuple[str, ...]  # receptacle types a target may start in


def game_id(split: str, task_type: str, index: int) -> str:
    """Stable id of a generated game."""
    return f"{split}/{task_type}/{index:05d}"


def game_seed(split: str, task_type: str, index: int) -> int:
    """The RNG seed of one game; independent of Python's hash randomisation."""
    digest = hashlib.sha256(f"household-v{GENERATOR_VERSION}:{game_id(split, task_type, index)}".encode())
    return int.from_bytes(digest.digest()[:8], "big")


def generate_world(split: str, task_type: str, index: int, params: GenerationParams) -> HouseholdWorld:
    """The room of game ``index`` of a split and task type."""
    check_task_type(task_type)
    if index < 0:
        raise ValueError(f"game index must be >= 0, got {index}")
    rng = random.Random(game_seed(split, task_type, index))
    scenes = [n for n in scene_numbers(split) if room_type(n) in ROOM_TYPES[task_type]]
    rng.shuffle(scenes)
    for number in scenes:
        scene = load_scene(number)
        choice = _choose_goal(rng, scene, task_type)
        if choice is not None:
            return _build_world(rng, scene, task_type, choice, params)
    raise ConfigError(f"no {split} scene supports task type {task_type!r}")


def make_game(split: str, task_type: str, index: int, params: GenerationParams) -> dict[str, Any]:
    """The TextWorld PDDL game (`.tw-pddl` JSON: domain, grammar, problem) plus its metadata."""
    world = generate_world(split, task_type, index, params)
    gid = game_id(split, task_type, index)
    return {
        "pddl_domain": alfred_domain(),
        "grammar": household_grammar(world.objective),
        "pddl_problem": render_problem(world, problem_name=f"{task_type}_{index}"),
        "turnopd": {
            "game_id": gid,
            "task_type": task_type,
            "objective": world.objective + ".",
            "scene": world.scene,
            "generator": params.cache_key(),
        },
    }


def _choose_goal(rng: random.Random, scene: Scene, task_type: str) -> _GoalChoice | None:
    receptacle_types = sorted(scene.receptacle_counts)
    objects = sorted(scene.object_types - set(LAMP_TYPES))
    if task_type == "look_at_obj_in_light":
        lamps = sorted(scene.object_types & set(LAMP_TYPES))
        hosts = [r for r in receptacle_types if r in LAMP_HOST_TYPES]
        feasible = {o: tuple(r for r in receptacle_types if can_contain(r, o)) for o in objects}
        feasible = {o: sources for o, sources in feasible.items() if sources}
        if not lamps or not hosts or not feasible:
            return None
        obj = rng.choice(sorted(feasible))
        return _GoalChoice(obj, None, rng.choice(lamps), None, feasible[obj])
    appliance = APPLIANCES[task_type][0] if task_type in APPLIANCES else None
    if appliance is not None:
        if appliance not in scene.receptacle_counts:
            return None
        objects = [o for o in objects if o in _STATE_TYPES[appliance]]
    options: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for obj in objects:
        for dest in receptacle_types:
            if dest == appliance or not can_contain(dest, obj):
                continue
            sources = tuple(r for r in receptacle_types if r not in (dest, appliance) and can_contain(r, obj))
            if sources:
                options.setdefault(obj, []).append((dest, sources))
    if not options:
        return None
    obj = rng.choice(sorted(options))
    dest, sources = rng.choice(options[obj])
    return _GoalChoice(obj, dest, None, appliance, sources)


def _build_world(
    rng: random.Random, scene: Scene, task_type: str, choice: _GoalChoice, params: GenerationParams
) -> HouseholdWorld:
    receptacles = _choose_receptacles(rng, scene, choice, params.max_receptacles)
    things: list[Thing] = []
    counts: dict[str, int] = {}

    def add(alfred_type: str, hosts: list[Receptacle]) -> None:
        counts[alfred_type] = counts.get(alfred_type, 0) + 1
        things.append(Thing(entity_id(alfred_type, counts[alfred_type]), alfred_type, rng.choice(hosts).id))

    sources = [r for r in receptacles if r.type in choice.source_types]
    low = 2 if task_type == "pick_two_obj_and_place" else 1
    for _ in range(rng.randint(low, max(low, params.max_targets))):
        add(choice.obj, sources)
    if choice.toggle is not None:
        add(choice.toggle, [r for r in receptacles if r.type in LAMP_HOST_TYPES])
    distractor_types = sorted(scene.object_types - {choice.obj} - set(LAMP_TYPES))
    for _ in range(
        rng.randint(params.max_distractors // 2, params.max_distractors) if distractor_types else 0
    ):
        alfred_type = rng.choice(distractor_types)
        hosts = [r for r in receptacles if can_contain(r.type, alfred_type)]
        if hosts:
            add(alfred_type, hosts)

    template = rng.choice(objective_templates(task_type))
    words = {
        k: (v or "").lower()
        for k, v in (("obj", choice.obj), ("recep", choice.recep), ("toggle", choice.toggle))
    }
    goal = HouseholdGoal(
        task_type,
        obj=words["obj"],
        recep=words["recep"] or None,
        toggle=words["toggle"] or None,
    )
    return HouseholdWorld(
        scene=scene.number,
        task_type=task_type,
        goal_types=(choice.obj, choice.recep, choice.toggle),
        goal=goal,
        objective=template.format(**words),
        receptacles=tuple(receptacles),
        things=tuple(things),
    )


def _choose_receptacles(
    rng: random.Random, scene: Scene, choice: _GoalChoice, limit: int
) -> list[Receptacle]:
    """Required receptacle types first (goal, appliance, a lamp host, a target source), then others."""
    required = [t for t in (choice.recep, choice.appliance) if t is not None]
    if choice.toggle is not None:
        required.append(rng.choice(sorted(LAMP_HOST_TYPES & set(scene.receptacle_counts))))
    if not set(required) & set(choice.source_types):
        required.append(rng.choice(choice.source_types))
    required = list(dict.fromkeys(required))
    pool = [(t, k) for t, n in scene.receptacle_counts.items() for k in range(n)]
    chosen = [(t, 0) for t in required]
    others = [slot for slot in pool if slot not in chosen]
    rng.shuffle(others)
    chosen += others[: max(0, limit - len(chosen))]
    per_type: dict[str, int] = {}
    receptacles = []
    for alfred_type, _ in sorted(chosen):
        per_type[alfred_type] = per_type.get(alfred_type, 0) + 1
        receptacles.append(entity_id(alfred_type, per_type[alfred_type]))
    types = {rid: t for (t, _), rid in zip(sorted(chosen), receptacles, strict=True)}
    # Location 0 is the agent's start (START_LOCATION); receptacle i stands at location i+1.
    return [Receptacle(rid, types[rid], f"loc_{i + 1:02d}") for i, rid in enumerate(sorted(receptacles))]
