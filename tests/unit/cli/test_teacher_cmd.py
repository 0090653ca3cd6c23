"""`turnopd teacher train` end to end on a cached expert dataset (no gateway) and the tiny zoo student."""

import json
from pathlib import Path

import pytest
from expert_episodes import scripted_episode

from services.models.build import MANIFEST
from services.models.loading import load_causal_lm
from services.settings.loader import load_recipe
from services.teacher_training.dataset import dataset_dir, save_dataset
from services.teacher_training.pipeline import expert_dataset, train_teacher, wanted_dataset
from services.teacher_training.trainer import StepReport


@pytest.fixture
def config(tmp_path: Path, zoo_cache: Path) -> Path:
    """Settings whose expert dataset is already in the cache: three scripted episodes."""
    path = tmp_path / "turnopd.toml"
    path.write_text(
        f'[models]\ncache_dir = "{tmp_path}"\n'
        f'[sft]\nbase = "{zoo_cache / "models" / "student"}"\nout = "student-sft"\n'
        "episodes = 3\nepochs = 2\nbatch_episodes = 2\nlr = 0.003\n"
    )
    info = wanted_dataset(load_recipe(path))
    episodes = [scripted_episode(seed) for seed in info.seeds]
    save_dataset(dataset_dir(info, tmp_path), info.model_copy(update={"episodes": 3}), episodes)
    return path


def test_train_reuses_the_cached_dataset_and_saves_a_loadable_checkpoint(cli, config: Path, tmp_path: Path):
    result = cli("teacher", "train", "--config", config, "--seed", "0")
    assert result.code == 0, result.err
    target = tmp_path / "models" / "student-sft"
    assert result.out.strip() == str(target)
    assert "expert data  cached: 3 episodes (0 dropped)" in result.err
    assert "training     3 steps" in result.err
    # not a terminal: a plain line per step (per 5% of the steps) instead of a live bar
    assert [line.split("  ")[0] for line in result.err.splitlines() if line.startswith("training step")] == [
        "training step 1/3",
        "training step 2/3",
        "training step 3/3",
    ]
    manifest = json.loads((target / MANIFEST).read_text())
    assert (manifest["stage"], manifest["name"], manifest["episodes"], manifest["steps"]) == (
        "sft",
        "student-sft",
        3,
        3,
    )
    assert manifest["base_manifest"]["name"] == "student"
    assert load_causal_lm("student-sft", cache_dir=tmp_path).num_parameters() > 0


def test_zoo_names_and_missing_bases_fail_in_one_line_before_any_work(cli, config: Path):
    refused = cli("teacher", "train", "--config", config, "--out", "teacher")
    assert refused.code == 2 and "is a zoo model" in refused.err
    missing = cli("teacher", "train", "--config", config, "--base", "no-such-model")
    assert missing.code == 2 and "no model checkpoint" in missing.err


def interrupted_run(config: Path, tmp_path: Path) -> Path:
    """Train from ``config`` until step 1 ends (a state saved after every step); where it is kept."""
    settings = load_recipe(config, {"sft": {"seed": 0, "checkpoint_every": 1}})

    def interrupt(report: StepReport) -> None:
        if report.step == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_teacher(settings, expert_dataset(settings), on_step=interrupt)
    return tmp_path / "models" / ".student-sft.resume"


def test_an_interrupted_run_continues_from_its_saved_state(cli, config: Path, tmp_path: Path):
    partial = interrupted_run(config, tmp_path)
    assert sorted(p.name for p in partial.iterdir()) == ["run.json", "state.pt"]
    assert not (tmp_path / "models" / "student-sft").exists()

    other = cli("teacher", "train", "--config", config, "--seed", "0", "--lr", "0.001")
    assert other.code == 2 and "(lr differ)" in other.err and "--fresh" in other.err
    assert partial.is_dir()
    result = cli("teacher", "train", "--config", config, "--seed", "0")
    assert result.code == 0, result.err
    assert "training     3 steps (resumed at step 1)" in result.err
    steps = [line.split("  ")[0] for line in result.err.splitlines() if line.startswith("training step")]
    assert steps == ["training step 2/3", "training step 3/3"]
    manifest = json.loads((tmp_path / "models" / "student-sft" / MANIFEST).read_text())
    assert (manifest["steps"], manifest["resumed_at_step"]) == (3, 1)
    assert not partial.exists()


def test_fresh_discards_a_partial_run(cli, config: Path, tmp_path: Path):
    partial = interrupted_run(config, tmp_path)
    result = cli("teacher", "train", "--config", config, "--seed", "0", "--lr", "0.001", "--fresh")
    assert result.code == 0, result.err
    assert "training     3 steps, " in result.err and "resumed" not in result.err
    assert not partial.exists()
