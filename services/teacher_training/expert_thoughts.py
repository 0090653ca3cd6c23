"""The expert's reasoning, written out as the ``<think>`` of each demonstration turn.

The paper runs student and teacher in thinking mode (a short chain of thought, then the tool
call). Our expert has no words of its own, so each turn's thought states the facts its next
decision rests on, all read from the observable history (the same ``HouseholdExpert`` the
gateway runs, replayed on the episode's observations)::

    put pen in drawer 1. holding: nothing. seen: none. at: drawer 1 closed. unsearched: drawer 1 shelf 1.

A tiny model imitates far better with these facts close to the action: the goal is restated
every turn instead of read back from the first message, the next place to search is the head
of the ``unsearched`` list (which shrinks by copy from the previous turn), and a target once
seen stays named. ``at`` copies the place from the last observation, with ``closed`` when the agent
stands before a closed receptacle: arriving there is not searching it, and the word right before
the list says so. The ``unsearched`` list has no separators: with the zoo tokenizer every entity
(``drawer 1``) is one token, so copying the list from the previous thought is a plain
token-after-token copy (an induction step), the easiest kind for a tiny model. Pure module: no
torch, no I/O.
"""

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from services.contracts.expert_data import ExpertEpisode, ExpertTurn
from services.envs.alfworld.expert import HouseholdExpert
from services.envs.alfworld.observations import RoomKnowledge, kind
from services.envs.alfworld.tasks import APPLIANCES, HouseholdGoal
from services.errors import InputError

_PAST = {"clean": "cleaned", "heat": "heated", "cool": "cooled"}


def _first_of_kind(room: RoomKnowledge, receptacle_kind: str | None) -> str:
    found = next((r for r in room.receptacles if kind(r) == receptacle_kind), None)
    return found or (receptacle_kind or "?")


def _task(goal: HouseholdGoal, room: RoomKnowledge) -> str:
    destination = _first_of_kind(room, goal.recep)
    match goal.task_type:
        case "pick_and_place":
            return f"put {goal.obj} in {destination}"
        case "pick_two_obj_and_place":
            return f"put two {goal.obj} in {destination}"
        case "look_at_obj_in_light":
            return f"look at {goal.obj} under {goal.toggle}"
        case "pick_clean_then_place" | "pick_heat_then_place" | "pick_cool_then_place":
            appliance_type, verb = APPLIANCES[goal.task_type]
            appliance = _first_of_kind(room, appliance_type.lower())
            return f"{verb} {goal.obj} with {appliance}, put in {destination}"
        case _:
            raise InputError(f"no thought template for task type {goal.task_type!r}")


def _holding(goal: HouseholdGoal, room: RoomKnowledge) -> str:
    if room.holding is None:
        return "nothing"
    done = [_PAST[verb] for verb, objects in sorted(room.changed.items()) if room.holding in objects]
    return ", ".join([room.holding, *done])


def _seen(goal: HouseholdGoal, room: RoomKnowledge) -> str:
    """Targets (and, to look under, lamps) seen and not yet handled, with where they are."""
    destination = _first_of_kind(room, goal.recep) if goal.task_type == "pick_two_obj_and_place" else None
    wanted = {goal.obj, goal.toggle or ""}
    seen = [
        f"{obj} in {receptacle}"
        for receptacle in room.receptacles
        if receptacle != destination
        for obj in room.contents.get(receptacle, [])
        if kind(obj) in wanted and obj != room.holding
    ]
    return ", ".join(seen) or "none"


def _at(room: RoomKnowledge) -> str:
    """Where the agent stands, and whether that receptacle is still closed (not yet searched)."""
    if room.location is None:
        return "none"
    return f"{room.location} closed" if room.closed.get(room.location, False) else room.location


def thought(
    goal: HouseholdGoal, room: RoomKnowledge, seen: str | None = None, unsearched: Sequence[str] | None = None
) -> str:
    """What the expert knows before its next action, in one line (``seen`` and ``unsearched``
    override those fields)."""
    if unsearched is None:
        unsearched = [r for r in room.receptacles if not room.searched(r)]
    return (
        f"{_task(goal, room)}. holding: {_holding(goal, room)}. seen: {seen or _seen(goal, room)}. "
        f"at: {_at(room)}. unsearched: {' '.join(unsearched) or 'none'}."
    )


# Receptacle kinds common in ALFWorld rooms: what a small policy "remembers" into a room without one.
_COMMON_RECEPTACLES = (
    "bed",
    "cabinet",
    "countertop",
    "desk",
    "diningtable",
    "drawer",
    "dresser",
    "shelf",
    "sidetable",
    "sofa",
)


@dataclass(frozen=True)
class FalseBelief:
    """A mistaken belief, acted on: the thought is wrong and so is the action it leads to (one the
    game does not admit, so the agent loop rejects it)."""

    thought: str
    action: str


def _absent_object(
    goal: HouseholdGoal, room: RoomKnowledge, admissible: Sequence[str], rng: random.Random
) -> FalseBelief | None:
    """It "sees" a target (or an object from elsewhere) where it stands and takes it; only at a
    searched, open place with free hands."""
    place = room.location
    if place is None or room.holding is not None or room.closed.get(place, False) or not room.searched(place):
        return None
    here = set(room.contents.get(place, []))
    elsewhere = [o for r, items in sorted(room.contents.items()) if r != place for o in items]
    candidates = [
        name
        for name in dict.fromkeys([f"{goal.obj} {n}" for n in (1, 2, 3)] + elsewhere)
        if name not in here and f"take {name} from {place}" not in admissible
    ]
    if not candidates:
        return None
    claimed = rng.choice(candidates)
    return FalseBelief(thought(goal, room, seen=f"{claimed} in {place}"), f"take {claimed} from {place}")


def _phantom_receptacle(
    goal: HouseholdGoal, room: RoomKnowledge, admissible: Sequence[str], rng: random.Random
) -> FalseBelief | None:
    """It lists a receptacle the room does not have first among the unsearched and goes there."""
    candidates = [
        name
        for name in (f"{k} 1" for k in _COMMON_RECEPTACLES)
        if name not in room.receptacles and f"go to {name}" not in admissible
    ]
    if not candidates:
        return None
    phantom = rng.choice(candidates)
    unsearched = [phantom, *(r for r in room.receptacles if not room.searched(r))]
    return FalseBelief(thought(goal, room, unsearched=unsearched), f"go to {phantom}")


def false_belief(
    goal: HouseholdGoal, room: RoomKnowledge, admissible: Sequence[str], rng: random.Random
) -> FalseBelief | None:
    """One of the two errors the household teacher made most in play, each followed there by the
    same thought and action until the turn cap: an absent object "seen" where it stands (when
    there is such a place), or a receptacle the room lacks at the head of ``unsearched``."""
    kinds = [_absent_object, _phantom_receptacle]
    rng.shuffle(kinds)
    return kinds[0](goal, room, admissible, rng) or kinds[1](goal, room, admissible, rng)


def drifted_thought(goal: HouseholdGoal, room: RoomKnowledge, rng: random.Random) -> str | None:
    """The thought of a goal restated wrong, the way a goal copied from thought to thought drifts
    in play: another object kind seen in the room in place of the target, or another receptacle
    kind as the destination (the rest derived from that wrong goal, as a drifted thought is);
    None when the room offers no other kind yet."""
    objects = sorted({kind(o) for items in room.contents.values() for o in items} - {goal.obj})
    receptacles = sorted({kind(r) for r in room.receptacles} - {goal.recep}) if goal.recep else []
    options = [replace(goal, obj=o) for o in objects] + [replace(goal, recep=r) for r in receptacles]
    return thought(rng.choice(options), room) if options else None


def goal_drifts(episode: ExpertEpisode, rate: float, rng: random.Random) -> list[str | None]:
    """Per turn, with chance ``rate`` on an expert turn after the first, a drifted thought to render
    in place of the expert's (that turn then is context, not a target); None elsewhere."""
    return [
        drifted_thought(goal, room, rng) if index > 0 and not turn.detour and rng.random() < rate else None
        for index, (turn, goal, room, _) in enumerate(_replay(episode))
    ]


def _replay(
    episode: ExpertEpisode,
) -> Iterator[tuple[ExpertTurn, HouseholdGoal, RoomKnowledge, Sequence[str]]]:
    """(turn, goal, knowledge before the turn, admissible before the turn) for every turn.

    The gateway's expert is replayed alongside, and its choice must be the recorded action on every
    expert turn: what is derived from the knowledge is exactly what the demonstrated actions came
    from. A detour turn gets the knowledge before it, then its outcome is observed.
    """
    start = episode.start
    expert = HouseholdExpert(start.objective, start.observation)
    goal = expert.goal
    if goal is None:
        raise InputError(f"episode {start.game_id}: objective {start.objective!r} is not a household goal")
    admissible: Sequence[str] = start.admissible_actions
    for turn in episode.turns:
        if not turn.detour and expert.next_action(admissible) != turn.action:
            raise InputError(f"episode {start.game_id}: the expert replay disagrees at {turn.action!r}")
        yield turn, goal, expert.room, admissible
        expert.observe(turn.action, turn.result.observation)
        admissible = turn.result.admissible_actions


def expert_thoughts(episode: ExpertEpisode) -> list[str]:
    """One thought per turn, each from the history before that turn's action."""
    return [thought(goal, room) for _, goal, room, _ in _replay(episode)]


def false_beliefs(episode: ExpertEpisode, rate: float, rng: random.Random) -> list[FalseBelief | None]:
    """Per turn, with chance ``rate`` before an expert turn, a false belief to render (and reject)
    before it; None elsewhere."""
    return [
        false_belief(goal, room, admissible, rng) if not turn.detour and rng.random() < rate else None
        for turn, goal, room, admissible in _replay(episode)
    ]
