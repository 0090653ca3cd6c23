"""scripts/first_mistake.py replays the household expert along a policy's game and names its first
step off the expert's path."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("first_mistake", REPO / "scripts" / "first_mistake.py")
assert _spec is not None and _spec.loader is not None
first_mistake = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(first_mistake)

ROOM = "You are in the middle of a room. Looking quickly around you, you see a desk 1, a drawer 1, and a shelf 1."
GOS = "go to desk 1, go to drawer 1, go to shelf 1, inventory, look"
PROMPT = (
    "<|im_start|>system\nYou are an agent.<|im_end|>\n<|im_start|>user\n-= Welcome to TextWorld, ALFRED! =-\n\n"
    f"{ROOM}\n\nYour task is to: put some pen on drawer.\nAdmissible actions: {GOS}.<|im_end|>\n"
    "<|im_start|>assistant\n"
)
AT_DESK = "You arrive at desk 1. On the desk 1, you see a book 1, and a pen 1."
DESK_ACTIONS = f"{GOS}, take book 1 from desk 1, take pen 1 from desk 1"


def _game(success: bool, actions: list[tuple[str, bool, str]]) -> tuple[dict, dict[int, str]]:
    """(action, accepted, observation with its admissible list) per turn; id 0 decodes to the prompt."""
    turns = [
        {
            "index": i,
            "response_start": 1 + i,
            "response_end": 2 + i,
            "action": a,
            "accepted": ok,
            "observation": o,
        }
        for i, (a, ok, o) in enumerate(actions)
    ]
    game = {
        "task_type": "pick_and_place",
        "success": success,
        "token_ids": list(range(len(actions) + 1)),
        "turns": turns,
    }
    return game, {0: PROMPT}


def _decode(texts: dict[int, str]):
    return lambda ids: "".join(texts.get(i, "") for i in ids)


def test_the_opening_gives_objective_room_and_admissible_actions():
    objective, intro, admissible = first_mistake.opening(PROMPT)
    assert objective == "put some pen on drawer."
    assert intro.endswith(ROOM)
    assert admissible == ["go to desk 1", "go to drawer 1", "go to shelf 1", "inventory", "look"]


def test_walking_past_a_target_in_sight_is_take_then_go():
    game, texts = _game(
        False,
        [
            ("go to desk 1", True, f"{AT_DESK}\nAdmissible actions: {DESK_ACTIONS}.\nYour task is to: x"),
            (
                "go to drawer 1",
                True,
                f"You arrive at drawer 1. The drawer 1 is closed.\nAdmissible actions: {GOS}.",
            ),
        ],
    )
    assert first_mistake.first_mistake(game, _decode(texts)) == (1, "take->go")


def test_a_wrong_take_a_rejection_and_a_clean_game():
    wrong, texts = _game(
        False,
        [
            ("go to desk 1", True, f"{AT_DESK}\nAdmissible actions: {DESK_ACTIONS}."),
            (
                "take book 1 from desk 1",
                True,
                "You pick up the book 1 from the desk 1.\nAdmissible actions: look.",
            ),
        ],
    )
    assert first_mistake.first_mistake(wrong, _decode(texts)) == (1, "take->take")
    rejected, _ = _game(False, [("go to sofa 1", False, "Nothing happens.")])
    assert first_mistake.first_mistake(rejected, _decode(texts)) == (0, "rejected")
    clean, _ = _game(True, [("go to desk 1", True, f"{AT_DESK}\nAdmissible actions: {DESK_ACTIONS}.")])
    assert first_mistake.first_mistake(clean, _decode(texts)) is None
    rows = first_mistake.mistake_rows([wrong, rejected, clean], _decode(texts))
    assert rows[False][0] == 2 and dict(rows[False][1]) == {"take->take": 1, "rejected": 1}
    assert rows[False][2] == [1, 0]
    assert rows[True][0] == 1 and dict(rows[True][1]) == {"never": 1} and rows[True][2] == []
