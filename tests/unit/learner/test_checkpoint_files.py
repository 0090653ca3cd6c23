"""Learner checkpoints on disk: saved durably, pruned only below the logged step, verified on resume."""

import json
import logging
from pathlib import Path

import pytest
import torch
from checkpoint_fixtures import write_checkpoint
from tiny_models import tiny_qwen3

from services.errors import InputError
from services.learner.checkpoint import (
    STATE_FILE,
    checkpoint_dir,
    complete_checkpoints,
    drop_checkpoints_after,
    latest_checkpoint,
    newest_loadable,
    prune_checkpoints,
    read_training_state,
    save_checkpoint,
    verify_checkpoint,
)


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return tiny_qwen3(seed=0, vocab=64, hidden=16, layers=1, tied=False)


def save(run_dir: Path, step: int, model: torch.nn.Module) -> Path:
    optimizer = {"state": {0: {"step": torch.tensor(float(step))}}, "param_groups": []}
    return save_checkpoint(run_dir, step, model, model.state_dict(), optimizer, "run", None)


def names(run_dir: Path) -> list[str]:
    return [p.name for p in complete_checkpoints(run_dir)]


def test_drop_checkpoints_after_keeps_older_ones(tmp_path):
    root = tmp_path / "checkpoints"
    for name in ("step_000002", "step_000004", "step_000006.tmp"):
        (root / name).mkdir(parents=True)
        (root / name / STATE_FILE).write_text("{}")
    dropped = drop_checkpoints_after(tmp_path, 3)
    assert [p.name for p in dropped] == ["step_000004", "step_000006.tmp"]
    assert sorted(p.name for p in root.iterdir()) == ["step_000002"]
    assert drop_checkpoints_after(tmp_path / "none", 0) == []


def test_keep_one_never_leaves_only_a_checkpoint_of_an_unlogged_step(tmp_path, model):
    # keep_checkpoints = 1, a checkpoint every step; the driver logs steps 1..3 (pruning after each),
    # then the run dies after the learner saved step 4 and before the driver logged it
    for step in (1, 2, 3, 4):
        save(tmp_path, step, model)
        if step <= 3:
            prune_checkpoints(tmp_path, keep=1, logged_step=step)
    assert names(tmp_path) == ["step_000004", "step_000003"]
    drop_checkpoints_after(tmp_path, 3)  # the resume: step 4 is not in the logs
    assert names(tmp_path) == ["step_000003"]
    assert latest_checkpoint(tmp_path) == checkpoint_dir(tmp_path, 3)
    prune_checkpoints(tmp_path, keep=1, logged_step=3)  # nothing newer is logged: step 3 stays
    assert names(tmp_path) == ["step_000003"]


def test_prune_keeps_the_newest_logged_ones_and_every_one_above_the_logged_step(tmp_path):
    for step in (2, 4, 6, 8):
        write_checkpoint(tmp_path, step)
    (checkpoint_dir(tmp_path, 10).with_name("step_000010.tmp")).mkdir()
    pruned = prune_checkpoints(tmp_path, keep=2, logged_step=7)
    assert [p.name for p in pruned] == ["step_000002"]
    assert names(tmp_path) == ["step_000008", "step_000006", "step_000004"]
    assert (tmp_path / "checkpoints" / "step_000010.tmp").is_dir()
    assert prune_checkpoints(tmp_path / "none", keep=1, logged_step=5) == []


def test_a_saved_checkpoint_records_its_files_sizes_and_loads(tmp_path, model):
    path = save(tmp_path, 3, model)
    state = json.loads((path / STATE_FILE).read_text())
    assert state["step"] == 3 and state["run_id"] == "run"
    on_disk = {p.name: p.stat().st_size for p in path.iterdir() if p.name != STATE_FILE}
    assert state["files"] == on_disk and {"model.safetensors", "optimizer.pt", "rng.pt"} <= set(on_disk)
    verify_checkpoint(path)
    optimizer, rng = read_training_state(path)
    assert float(optimizer["state"][0]["step"]) == 3.0 and rng.dtype == torch.uint8
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_000003"]  # no .tmp


def test_save_syncs_every_file_the_temp_dir_and_the_parent_after_the_rename(tmp_path, model, synced):
    path = save(tmp_path, 2, model)
    tmp = f"{path}.tmp"
    files = sorted(p.name for p in path.iterdir())
    assert sorted(Path(s).name for s in synced if Path(s).parent == Path(tmp)) == files
    # the temp dir after its files, then (once renamed) checkpoints/, and the run dir it was made in
    assert synced[len(files) :] == [tmp, str(tmp_path / "checkpoints"), str(tmp_path)]
    synced.clear()
    save(tmp_path, 4, model)
    assert synced[-1] == str(tmp_path / "checkpoints")  # checkpoints/ existed: the run dir is not synced


def test_a_truncated_newest_model_falls_back_to_the_one_before(tmp_path, model, caplog):
    save(tmp_path, 2, model)
    weights = save(tmp_path, 4, model) / "model.safetensors"
    saved = weights.stat().st_size
    with weights.open("r+b") as fh:
        fh.truncate(saved // 2)
    with pytest.raises(InputError, match=r"model\.safetensors has \d+ bytes, not the \d+ saved"):
        verify_checkpoint(weights.parent)
    with caplog.at_level(logging.WARNING, logger="services.learner.checkpoint"):
        found = newest_loadable(tmp_path, read_training_state)
    assert found is not None and found[0] == checkpoint_dir(tmp_path, 2)
    assert [r.getMessage() for r in caplog.records] == [
        f"skipped the damaged checkpoint step_000004 ({weights} has {saved // 2} bytes, not the {saved} "
        "saved); trying the one before"
    ]
    assert latest_checkpoint(tmp_path) == checkpoint_dir(tmp_path, 2)


def test_a_damaged_training_state_is_skipped_and_an_old_checkpoint_without_sizes_still_loads(tmp_path):
    old = write_checkpoint(tmp_path, 2, record_sizes=False)
    verify_checkpoint(old)  # sizes unknown: the files it loads exist, the header parses
    missing = write_checkpoint(tmp_path, 4, record_sizes=False)
    (missing / "rng.pt").unlink()
    corrupt = write_checkpoint(tmp_path, 6, record_sizes=False)
    (corrupt / "optimizer.pt").write_bytes(b"not a zip archive")  # passes the cheap check, fails to load
    with pytest.raises(InputError, match=r"rng.pt is missing"):
        verify_checkpoint(missing)
    with pytest.raises(InputError, match=r"optimizer or RNG state does not load"):
        read_training_state(corrupt)
    found = newest_loadable(tmp_path, read_training_state)
    assert found is not None and found[0] == old
    assert newest_loadable(tmp_path / "none", read_training_state) is None


def test_a_header_cut_short_fails_even_without_recorded_sizes(tmp_path):
    path = write_checkpoint(tmp_path, 2, record_sizes=False)
    (path / "model.safetensors").write_bytes(b"\x10\x00")
    with pytest.raises(InputError, match=r"model.safetensors does not load"):
        verify_checkpoint(path)
    (path / STATE_FILE).write_text('{"step": 2, "ru')
    with pytest.raises(InputError, match=rf"{path / STATE_FILE} is damaged"):
        verify_checkpoint(path)


def test_complete_checkpoints_are_newest_first_and_never_a_temp_dir(tmp_path):
    for step in (9, 10, 100):
        write_checkpoint(tmp_path, step)
    tmp = checkpoint_dir(tmp_path, 200).with_name("step_000200.tmp")
    tmp.mkdir()
    (tmp / STATE_FILE).write_text('{"step": 200}')  # crashed between its state file and the rename
    checkpoint_dir(tmp_path, 300).mkdir()  # no state file: never finished
    assert names(tmp_path) == ["step_000100", "step_000010", "step_000009"]
    assert latest_checkpoint(tmp_path, at_most=99) == checkpoint_dir(tmp_path, 10)
    assert latest_checkpoint(tmp_path, at_most=8) is None
