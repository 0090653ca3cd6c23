"""With real ALFWorld game files, the backend serves them: ALFWorld's directory layout, its
demangled entity names, and the put wording. The files here are written in that format from a
generated game, with ALFWorld-style mangled ids and the unpatched alfred.twl2 grammar."""

import json
import re

import pytest

from services.envs.alfworld.alfred_assets import alfred_grammar
from services.envs.alfworld.backend import AlfworldBackend
from services.envs.alfworld.generator import GenerationParams, make_game
from services.envs.alfworld.settings import HouseholdGenSettings

_ID = re.compile(r"\b(?!loc_)([a-z]+)_(\d\d)\b")


def alfred_id(match: re.Match[str]) -> str:
    base, number = match.groups()
    if base.endswith("basin"):  # ALFWorld: 'Sink|x|y|z|SinkBasin'
        return f"{base[: -len('basin')]}_bar__plus_{number}_dot_00_bar_{base}"
    return f"{base}_bar__plus_{number}_dot_00"


def write_alfworld_game(
    root, split: str, task_dir: str, task_type: str, index: int, solvable: bool = True
) -> None:
    game = make_game(split, task_type, index, GenerationParams())
    objective = game["turnopd"]["objective"][:-1]
    trial = root / "json_2.1.1" / split / task_dir / "trial_T0"
    trial.mkdir(parents=True)
    data = {
        "pddl_domain": game["pddl_domain"],
        "grammar": alfred_grammar().replace("UNKNOWN GOAL", objective),
        "pddl_problem": _ID.sub(alfred_id, game["pddl_problem"]),
        "solvable": solvable,
    }
    (trial / "game.tw-pddl").write_text(json.dumps(data))
    (trial / "traj_data.json").write_text("{}")


@pytest.fixture
def data_dir(tmp_path):
    root = tmp_path / "alfworld"
    write_alfworld_game(
        root,
        "valid_unseen",
        "pick_clean_then_place_in_recep-Cloth-None-Cabinet-401",
        "pick_clean_then_place",
        0,
    )
    write_alfworld_game(
        root, "valid_unseen", "pick_and_place_simple-Pen-None-Drawer-301", "pick_and_place", 0
    )
    write_alfworld_game(
        root, "valid_unseen", "pick_and_place_with_movable_recep-Pen-Mug-Desk-301", "pick_and_place", 1
    )
    write_alfworld_game(
        root, "train", "pick_heat_then_place_in_recep-Bread-None-CounterTop-10", "pick_heat_then_place", 0
    )
    return root


def test_real_games_are_indexed_by_alfworld_task_dirs(data_dir, tmp_path):
    backend = AlfworldBackend(HouseholdGenSettings(), tmp_path / "cache", data_dir)
    info = backend.info()
    # Movable-receptacle and unsolvable games are skipped, as ALFWorld does.
    assert info.games_per_split == {"train": 1, "valid_unseen": 2}
    assert "ALFWorld data" in info.source
    assert backend.pool_size("valid_unseen", "pick_and_place") == 1


def test_real_game_plays_with_demangled_names_and_put_wording(data_dir, tmp_path):
    backend = AlfworldBackend(HouseholdGenSettings(), tmp_path / "cache", data_dir)
    choice = backend.choose("valid_unseen", 0, "pick_clean_then_place")
    session = backend.open("valid_unseen", choice, expert=True)
    try:
        opening = session.start()
        assert "sinkbasin 1" in opening.observation and "_bar_" not in opening.observation
        assert opening.game_id.startswith("json_2.1.1/valid_unseen/pick_clean_then_place_in_recep-Cloth")
        action, won, saw_put = opening.expert_action, False, False
        for _ in range(40):
            assert action is not None
            saw_put |= action.startswith("put ") and " in/on " in action
            outcome = session.step(action)
            if outcome.won:
                won = True
                break
            action = outcome.expert_action
        assert won and saw_put
    finally:
        session.close()


def test_missing_task_type_in_data_is_an_input_error(data_dir, tmp_path):
    backend = AlfworldBackend(HouseholdGenSettings(), tmp_path / "cache", data_dir)
    with pytest.raises(ValueError, match="look_at_obj_in_light"):
        backend.choose("valid_unseen", 0, "look_at_obj_in_light")
