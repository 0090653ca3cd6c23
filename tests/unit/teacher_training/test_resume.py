"""The partial-run store of `turnopd teacher train`: round trip, another run's state refused by
name, settings that change nothing ignored, cleared on request."""

from pathlib import Path

import pytest
import torch

from services.errors import ConflictError
from services.settings.sft import SFTSettings
from services.teacher_training.resume import ResumeStore, TrainState, resume_dir, run_key


def state(step: int) -> TrainState:
    return TrainState(
        next_step=step,
        total_steps=10,
        losses=[2.0, 1.5][:step],
        tokens_seen=123 * step,
        seconds=4.5,
        model_state={"w": torch.arange(6.0).reshape(2, 3) * step},
        optimizer_state={"state": {0: {"step": torch.tensor(float(step))}}, "param_groups": [{"lr": 0.1}]},
    )


def test_saved_state_loads_back_and_the_latest_save_wins(tmp_path: Path):
    store = ResumeStore(resume_dir(tmp_path / "teacher-big"), run_key(SFTSettings(), "data-1"))
    assert store.directory == tmp_path / ".teacher-big.resume"
    assert store.load() is None
    store.save(state(1))
    store.save(state(2))
    loaded = store.load()
    assert loaded is not None
    assert (loaded.next_step, loaded.total_steps, loaded.losses, loaded.tokens_seen) == (
        2,
        10,
        [2.0, 1.5],
        246,
    )
    assert torch.equal(loaded.model_state["w"], torch.arange(6.0).reshape(2, 3) * 2)
    assert loaded.optimizer_state["param_groups"] == [{"lr": 0.1}]
    assert sorted(p.name for p in store.directory.iterdir()) == ["run.json", "state.pt"]
    store.clear()
    assert not store.directory.exists() and store.load() is None


def test_another_runs_state_is_refused_by_name(tmp_path: Path):
    directory = resume_dir(tmp_path / "teacher-big")
    ResumeStore(directory, run_key(SFTSettings(lr=1e-3), "data-1")).save(state(1))
    with pytest.raises(ConflictError, match=r"\(dataset, lr differ\).*--fresh"):
        ResumeStore(directory, run_key(SFTSettings(lr=2e-3), "data-2")).load()
    threads = ResumeStore(directory, run_key(SFTSettings(lr=1e-3, threads=2, checkpoint_every=7), "data-1"))
    loaded = threads.load()
    assert loaded is not None and loaded.next_step == 1


def test_the_novel_token_weight_is_in_the_key_only_when_on():
    assert "novel_token_weight" not in run_key(SFTSettings(), "data-1")
    assert run_key(SFTSettings(novel_token_weight=5.0), "data-1")["novel_token_weight"] == 5.0
    with pytest.raises(ValueError, match="novel_token_weight"):
        SFTSettings(novel_token_weight=0.5)


def test_a_joint_recipe_s_parts_are_in_the_key_and_a_recipe_of_one_env_keeps_its_old_key():
    assert "mix" not in run_key(SFTSettings(), "data-1")  # states saved before [[sft.mix]] still resume
    joint = SFTSettings(mix=[{"env": "alfworld", "episodes": 3, "task_reminder": True}])
    other = SFTSettings(mix=[{"env": "alfworld", "episodes": 3}])
    assert run_key(joint, "a+b")["mix"] == [
        {"env": "alfworld", "episodes": 3, "max_expert_turns": 60, "task_reminder": True}
    ]
    assert run_key(joint, "a+b") != run_key(other, "a+b")  # another format: another run
