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


def test_a_joint_recipe_names_each_env_once_and_owns_its_parts_keys(tmp_path: Path):
    config = tmp_path / "joint.toml"
    config.write_text(
        '[rollout]\ntask_reminder = true\n[[sft.mix]]\nenv = "alfworld"\nepisodes = 5\ntask_reminder = true\n'
        '[[sft.mix]]\nenv = "webshop"\nepisodes = 7\nmax_expert_turns = 30\n'
    )
    recipe = load_recipe(config)
    assert [(p.env, p.episodes, p.max_expert_turns, p.task_reminder) for p in recipe.parts()] == [
        ("alfworld", 5, 60, True),
        ("webshop", 7, 30, False),
    ]
    # a recipe of one env is one part, in [rollout]'s format
    single = load_recipe(None, {"sft": {"env": "search", "episodes": 9}, "rollout": {"task_reminder": True}})
    assert [(p.env, p.episodes, p.task_reminder) for p in single.parts()] == [("search", 9, True)]
    with pytest.raises(ConfigError, match=r"set env, max_expert_turns in each part, not in \[sft\]"):
        load_recipe(config, {"sft": {"env": "search", "max_expert_turns": 10}})
    twice = tmp_path / "twice.toml"
    twice.write_text('[[sft.mix]]\nenv = "search"\nepisodes = 1\n[[sft.mix]]\nenv = "search"\nepisodes = 2\n')
    with pytest.raises(
        ConfigError, match=r"each env may have one \[\[sft.mix\]\] part, got \['search', 'search'\]"
    ):
        load_recipe(twice)
