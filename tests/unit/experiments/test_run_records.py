"""Keeping complete runs as records and bringing them back into another comparison directory."""

import json
import shutil

import pytest
from comparison_logs import materialise_run

from services.errors import ConflictError, InputError
from services.experiments.compare_dir import load_run, run_path
from services.experiments.compare_plan import plan_runs
from services.experiments.run_records import RECORD_FILES, restore_records, save_records


def _materialise(settings, steps_done):
    """A compare run dir (``materialise_run``) with the controller's log and a checkpoint beside it."""
    path = materialise_run(settings, steps_done)
    (path / "controller.jsonl").write_text('{"step": 1}\n')
    (path / "ray_train").mkdir()
    (path / "ray_train" / "checkpoint.bin").write_bytes(b"\0" * 64)


def test_complete_runs_are_recorded_and_restored_into_another_directory(tmp_path):
    first = plan_runs(None, ["turnopd", "vanilla"], 1, 3, tmp_path / "here")
    _materialise(first[0].settings, 3)  # complete
    _materialise(first[1].settings, 2)  # partial: not recorded
    records = tmp_path / "records"
    saved = save_records(first, records)
    assert [(r.method, r.seed) for r in saved] == [("turnopd", 0)]
    kept = run_path(records, "turnopd", 0)
    assert sorted(p.name for p in kept.iterdir()) == sorted(RECORD_FILES)  # no checkpoint
    assert not run_path(records, "vanilla", 0).exists()

    elsewhere = tmp_path / "there"
    planned = plan_runs(None, ["turnopd", "vanilla"], 1, 3, elsewhere)
    restored = restore_records(planned, records)
    assert [(r.method, r.seed) for r in restored] == [("turnopd", 0)]
    again = plan_runs(None, ["turnopd", "vanilla"], 1, 3, elsewhere)  # its config matches the plan
    assert [p.state for p in again] == ["complete", "new"]
    config = json.loads((again[0].path / "config.json").read_text())
    assert config["run"]["run_dir"] == str(again[0].path)
    assert config["run"]["run_id"] == "there-turnopd-seed0"
    run = load_run(again[0].path)
    assert [m.step for m in run.metrics] == [1, 2, 3]
    assert [(e.step, e.avg_at_n) for e in run.evals] == [(3, 0.5)]
    assert restore_records(again, records) == []  # nothing new to restore


def test_a_partial_record_or_one_with_other_settings_is_refused(tmp_path):
    planned = plan_runs(None, ["vanilla"], 1, 3, tmp_path / "here")
    _materialise(planned[0].settings, 3)
    records = tmp_path / "records"
    save_records(planned, records)

    longer = plan_runs(None, ["vanilla"], 1, 4, tmp_path / "longer")
    with pytest.raises(InputError, match="not a complete 4-step run"):
        restore_records(longer, records)

    other = tmp_path / "other.toml"
    other.write_text("[optim]\nlr = 0.5\n")
    planned = plan_runs(other, ["vanilla"], 1, 3, tmp_path / "other")
    with pytest.raises(ConflictError, match=r"other settings \(optim.lr differ\)"):
        restore_records(planned, records)
    assert not (tmp_path / "other").exists()  # refused before anything was copied

    assert restore_records(planned, tmp_path / "absent") == []  # nothing recorded yet
    with pytest.raises(InputError, match="is not a directory"):
        restore_records(planned, tmp_path / "other.toml")


def test_a_record_already_there_is_never_replaced(tmp_path):
    """Saving again leaves a record of the same run as it is; a record of other settings, or of
    another run with the same settings, stops the save with what differs, the record untouched."""
    planned = plan_runs(None, ["vanilla"], 1, 3, tmp_path / "here")
    _materialise(planned[0].settings, 3)
    records = tmp_path / "records"
    kept = run_path(records, "vanilla", 0)
    assert save_records(planned, records) == planned
    before = {p.name: p.read_bytes() for p in kept.iterdir()}
    assert save_records(planned, records) == planned  # the same run: nothing rewritten
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == before

    other = tmp_path / "other.toml"
    other.write_text("[optim]\nlr = 0.5\n")
    changed = plan_runs(other, ["vanilla"], 1, 3, tmp_path / "lr")
    _materialise(changed[0].settings, 3)
    with pytest.raises(ConflictError, match=r"other settings \(optim.lr differ\).*not replaced"):
        save_records(changed, records)

    rerun = plan_runs(None, ["vanilla"], 1, 3, tmp_path / "rerun")
    _materialise(rerun[0].settings, 3)
    (rerun[0].path / "eval.jsonl").write_text(
        (rerun[0].path / "eval.jsonl").read_text().replace("0.5", "0.25")
    )
    with pytest.raises(ConflictError, match=r"another run of the same settings \(eval.jsonl differ"):
        save_records(rerun, records)
    assert {p.name: p.read_bytes() for p in kept.iterdir()} == before
    assert sorted(p.name for p in kept.parent.iterdir()) == ["seed0"]  # no partial folder left


def test_records_that_cannot_be_read_are_named_and_nothing_is_restored(tmp_path):
    planned = plan_runs(None, ["turnopd", "vanilla"], 1, 3, tmp_path / "here")
    for run in planned:
        _materialise(run.settings, 3)
    records = tmp_path / "records"
    save_records(planned, records)

    # the second record is refused: the first is not copied either. A torn last line is left out (the
    # record lacks its last step); a damaged line before it is named by file and line
    cut = run_path(records, "vanilla", 0) / "metrics.jsonl"
    whole = cut.read_text()
    cut.write_text(whole[:-20])
    elsewhere = plan_runs(None, ["turnopd", "vanilla"], 1, 3, tmp_path / "there")
    with pytest.raises(InputError, match=r"vanilla/seed0 is not a complete 3-step run"):
        restore_records(elsewhere, records)
    cut.write_text("{" + whole)
    with pytest.raises(InputError, match=rf"^{cut}:1: not a valid log line"):
        restore_records(elsewhere, records)
    assert not (tmp_path / "there").exists()

    shutil.rmtree(run_path(records, "vanilla", 0))
    run_path(records, "vanilla", 0).write_text("not a record")
    with pytest.raises(InputError, match=r"records: .*vanilla/seed0 is not a directory"):
        save_records(planned, records)
