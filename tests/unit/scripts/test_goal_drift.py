"""scripts/goal_drift.py counts, per task type, the games whose restated goal changed."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("goal_drift", REPO / "scripts" / "goal_drift.py")
assert _spec is not None and _spec.loader is not None
goal_drift = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(goal_drift)


_TEXTS: list[str] = []  # every response of every game below; token id i decodes to _TEXTS[i]


def _game(task_type: str, success: bool, goals: list[str]) -> dict:
    first = len(_TEXTS)
    _TEXTS.extend(f"<think> {g}. holding: nothing. </think>" for g in goals)
    ids = list(range(first, len(_TEXTS)))
    turns = [{"response_start": i, "response_end": i + 1} for i in range(len(goals))]
    return {"task_type": task_type, "success": success, "token_ids": ids, "turns": turns}


def test_drift_is_counted_per_task_type_for_lost_and_won_games() -> None:
    games = [
        _game(
            "pick_two_obj_and_place",
            False,
            ["put two pen in bed 1", "put two pen in bed 1", "put two mug in bed 1"],
        ),
        _game("pick_two_obj_and_place", False, ["put two pen in bed 1"] * 3),
        _game("pick_two_obj_and_place", True, ["put two pen in bed 1"] * 2),
        _game("pick_and_place", True, ["put pen in bed 1", "put pen in desk 1"]),
    ]
    rows = goal_drift.drift_rows(games, lambda ids: _TEXTS[ids[0]])
    assert rows == {"pick_two_obj_and_place": [3, 2, 1, 0], "pick_and_place": [1, 0, 0, 1]}
