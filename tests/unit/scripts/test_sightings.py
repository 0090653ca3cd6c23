"""scripts/sightings.py finds the targets a policy's thoughts missed and the non-targets they claimed."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("sightings", REPO / "scripts" / "sightings.py")
assert _spec is not None and _spec.loader is not None
sightings = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sightings)

ADMISSIBLE = "\nAdmissible actions: look.\nYour task is to: put some pen on drawer."


def _game(task_type: str, success: bool, turns: list[tuple[str, str, bool]]) -> tuple[dict, list[str]]:
    """(thought, observation, accepted) per turn; token id i decodes to the i-th response."""
    texts = [f"<think>\n{thought}\n</think>\n\n<tool_call>...</tool_call>" for thought, _, _ in turns]
    records = [
        {"response_start": i, "response_end": i + 1, "observation": obs + ADMISSIBLE, "accepted": ok}
        for i, (_, obs, ok) in enumerate(turns)
    ]
    game = {
        "task_type": task_type,
        "success": success,
        "token_ids": list(range(len(turns))),
        "turns": records,
    }
    return game, texts


def thought(goal: str, holding: str = "nothing", seen: str = "none") -> str:
    return f"{goal}. holding: {holding}. seen: {seen}. at: shelf 1. unsearched: desk 1."


def test_targets_kinds_come_from_the_goal_of_the_first_thought():
    assert sightings.target_kinds("put pen in drawer 1. holding: nothing.") == {"pen"}
    assert sightings.target_kinds("put two keychain in sofa 1. holding:") == {"keychain"}
    assert sightings.target_kinds("look at watch under desklamp. holding:") == {"watch", "desklamp"}
    assert sightings.target_kinds("clean mug with sinkbasin 1, put in shelf 1. holding:") == {"mug"}
    assert sightings.target_kinds("no goal here") == set()


def test_a_shown_target_the_next_thought_omits_is_missed_and_another_kind_claimed_is_false():
    goal = "put pen in drawer 1"
    lost, lost_texts = _game(
        "pick_and_place",
        False,
        [
            (thought(goal), "You arrive at desk 1. On the desk 1, you see a book 1, and a pen 2.", True),
            (thought(goal, seen="book 1 in desk 1"), 'Nothing happens. "take" is not admissible.', False),
            (
                thought(goal, seen="book 1 in desk 1"),
                "You arrive at shelf 1. On the shelf 1, you see a pen 1.",
                True,
            ),
            (thought(goal, seen="pen 1 in shelf 1"), "You pick up the pen 1 from the shelf 1.", True),
        ],
    )
    won, won_texts = _game(
        "pick_and_place",
        True,
        [
            (thought(goal), "You arrive at shelf 1. On the shelf 1, you see a pen 3.", True),
            (thought(goal, seen="pen 3 in shelf 1"), "You pick up the pen 3 from the shelf 1.", True),
            # holding a target, another one shown is not a miss
            (thought(goal, holding="pen 3"), "You arrive at desk 1. On the desk 1, you see a pen 1.", True),
            (thought(goal, holding="pen 3"), "You put the pen 3 in/on the drawer 1.", True),
        ],
    )
    texts = lost_texts + won_texts
    won["token_ids"] = [i + len(lost_texts) for i in won["token_ids"]]  # its responses follow the lost game's

    def decode(ids: list[int]) -> str:
        return texts[ids[0]]

    assert sightings.game_sightings(lost, decode) == (["pen 2", "pen 1"], ["pen 2"], ["book 1", "book 1"])
    assert sightings.game_sightings(won, decode) == (["pen 3"], [], [])
    rows, numbers = sightings.sighting_rows([lost, won], decode)
    assert rows == {"pick_and_place": [2, 1, 1, 0, 1, 0]}
    assert numbers == {"1": [1, 0], "2+": [2, 1]}
