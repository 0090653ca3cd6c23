from pathlib import Path

import pytest

from services.errors import ConfigError
from services.settings.loader import load_recipe
from services.settings.recipe import TeacherRecipeSettings


def test_defaults_train_the_zoo_teacher_into_teacher_sft():
    sft = TeacherRecipeSettings().sft
    assert (sft.base, sft.out, sft.env, sft.split, sft.gateway_url) == (
        "teacher",
        "teacher-sft",
        "alfworld",
        "train",
        None,
    )
    assert sft.episodes >= 1 and sft.epochs > 0 and sft.lr > 0


def test_file_environment_and_overrides(tmp_path: Path, monkeypatch):
    config = tmp_path / "c.toml"
    config.write_text('[sft]\nepisodes = 12\nepochs = 0.5\nschedule = "linear"\n')
    monkeypatch.setenv("TURNOPD_SFT__LR", "0.01")
    sft = load_recipe(config, {"sft": {"seed": 3}}).sft
    assert (sft.episodes, sft.epochs, sft.schedule, sft.lr, sft.seed) == (12, 0.5, "linear", 0.01, 3)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[sft]\nepochs = 0\n", "sft.epochs"),
        ('[sft]\nsplit = "valid_unseen"\n', "sft.split"),
        ("[sft]\nbetas = [0.9, 1.0]\n", "sft"),
        ('[sft]\nschedule = "step"\n', "sft.schedule"),
        ("[sft]\nunknown = 1\n", "sft.unknown"),
        ("[sft]\nbase_layers = [0, -1]\n", "sft"),
        ("[sft]\nbase_layers = []\n", "sft"),
        ("[sft]\ngoal_drift_rate = 1.0\n", "sft.goal_drift_rate"),
    ],
)
def test_bad_values_name_their_key(tmp_path: Path, text: str, key: str):
    config = tmp_path / "c.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_recipe(config)


def test_base_layers_are_kept_as_given(tmp_path: Path):
    config = tmp_path / "c.toml"
    config.write_text('[sft]\nbase = "teacher-recovery"\nbase_layers = [0, 3]\n')
    sft = load_recipe(config).sft
    assert (sft.base, sft.base_layers) == ("teacher-recovery", [0, 3])
    config.write_text("[sft]\nbase_layers = [0, 1, 2, 1, 2, 3]\n")
    assert load_recipe(config).sft.base_layers == [0, 1, 2, 1, 2, 3]
    assert load_recipe(None).sft.base_layers is None
