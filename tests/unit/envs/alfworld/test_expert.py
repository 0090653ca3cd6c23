"""The household expert: it reads only observations, and it wins generated games."""

import pytest

from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES
from services.envs.alfworld.backend import generated_naming
from services.envs.alfworld.expert import HouseholdExpert
from services.envs.alfworld.generator import GenerationParams, make_game
from services.envs.alfworld.observations import RoomKnowledge, room_receptacles
from services.envs.alfworld.pddl_engine import PddlEngine

INTRO = (
    "You are in the middle of a room. Looking quickly around you, you see a drawer 1, a fridge 1, "
    "a microwave 1, and a countertop 1.\n\nYour task is to: put a hot egg in countertop."
)


def admissible_all(expert: HouseholdExpert) -> list[str]:
    # Admissibility is the engine's job; these text-only tests accept whatever the expert proposes.
    return [expert._decide(expert.goal, [])]  # type: ignore[arg-type]


def test_search_visits_the_listing_in_order_and_opens_closed_receptacles():
    expert = HouseholdExpert("put a hot egg in countertop.", INTRO)
    steps = [
        ("go to drawer 1", "You arrive at drawer 1. The drawer 1 is closed."),
        ("open drawer 1", "You open the drawer 1. The drawer 1 is open. In it, you see a fork 1."),
        ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed."),
        ("open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see a egg 2."),
        ("take egg 2 from fridge 1", "You pick up the egg 2 from the fridge 1."),
        ("go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed."),
        ("heat egg 2 with microwave 1", "You heat the egg 2 using the microwave 1."),
        ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see nothing."),
    ]
    for action, observation in steps:
        assert admissible_all(expert) == [action]
        expert.observe(action, observation)
    assert admissible_all(expert) == ["put egg 2 in/on countertop 1"]


def test_a_target_seen_earlier_is_fetched_without_searching_further():
    expert = HouseholdExpert("put two egg in countertop.", INTRO)
    expert.observe(
        "go to drawer 1", "You arrive at drawer 1. The drawer 1 is open. In it, you see a egg 1, and a egg 3."
    )
    expert.observe("take egg 1 from drawer 1", "You pick up the egg 1 from the drawer 1.")
    expert.observe("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see nothing.")
    expert.observe("put egg 1 in/on countertop 1", "You put the egg 1 in/on the countertop 1.")
    assert admissible_all(expert) == ["go to drawer 1"]


def test_unknown_objective_gives_no_action():
    expert = HouseholdExpert("do something nice", INTRO)
    assert expert.next_action(["look"]) is None


def test_inadmissible_choice_is_not_offered():
    expert = HouseholdExpert("put a hot egg in countertop.", INTRO)
    assert expert.next_action(["look", "inventory"]) is None
    assert expert.next_action(["go to drawer 1", "look"]) == "go to drawer 1"


# One engine for the whole module: Fast Downward library copies are never unloaded (see pddl_engine).
ENGINE = PddlEngine()


def play(task_type: str, split: str, index: int) -> list[tuple[str, str]]:
    """Play a generated game with the expert through TextWorld's PDDL engine; return the transcript."""
    ENGINE.load(make_game(split, task_type, index, GenerationParams()), generated_naming)
    intro, admissible = ENGINE.reset()
    expert = HouseholdExpert(intro.split("Your task is to: ")[1], intro)
    transcript = [("", intro)]
    for _ in range(60):
        action = expert.next_action(sorted(set(admissible) - {"help"}))
        assert action is not None, f"expert stuck in {split}/{task_type}/{index}: {transcript[-3:]}"
        feedback, won, admissible = ENGINE.step(action)
        expert.observe(action, feedback)
        transcript.append((action, feedback))
        if won:
            return transcript
    raise AssertionError(f"expert did not win {split}/{task_type}/{index} in 60 turns")


@pytest.mark.parametrize("split", ["train", "valid_unseen"])
@pytest.mark.parametrize("task_type", HOUSEHOLD_TASK_TYPES)
def test_expert_wins_and_only_uses_what_it_has_seen(task_type, split):
    transcript = play(task_type, split, index=1)
    assert 2 <= len(transcript) - 1 <= 40
    room = RoomKnowledge(room_receptacles(transcript[0][1]))
    for action, feedback in transcript[1:]:
        if action.startswith("take "):
            obj, receptacle = action.removeprefix("take ").split(" from ")
            assert obj in room.contents.get(receptacle, []), f"took {obj} before seeing it at {receptacle}"
        target = action.removeprefix("go to ")
        if action.startswith("go to ") and room.holding is None and not room.searched(target):
            # Searching with empty hands: the room description's order, nothing skipped.
            earlier = room.receptacles[: room.receptacles.index(target)]
            assert all(room.searched(r) for r in earlier), f"{action} skips {earlier}"
        room.observe(action, feedback)
