"""Starting or continuing a planned run directory: created only when new, refused with other settings."""

import json

import pytest
from comparison_logs import eval_record, materialise_run, step_metrics

from services.errors import ConflictError
from services.experiments.run_start import checked_state, opened
from services.run_dir import CONFIG_FILE, EVAL_FILE, METRICS_FILE
from services.settings import load_settings


def test_a_new_run_is_created_and_a_logged_one_reused_with_its_state(tmp_path):
    settings = load_settings(None, {"run": {"run_dir": tmp_path / "run"}, "optim": {"steps": 3}})
    assert checked_state(settings, "fix it") == "new"
    run = opened(settings, "new")
    assert json.loads(run.saved_config())["optim"]["steps"] == 3
    run.append(METRICS_FILE, step_metrics(1, 1.0).model_dump_json())
    assert checked_state(settings, "fix it") == "partial"
    config = (tmp_path / "run" / CONFIG_FILE).read_text()
    assert opened(settings, "partial").root == tmp_path / "run"
    assert (tmp_path / "run" / CONFIG_FILE).read_text() == config  # not written again
    for k in (2, 3):
        run.append(METRICS_FILE, step_metrics(k, 1.0).model_dump_json())
    run.append(EVAL_FILE, eval_record(3, 3.0, 0.5).model_dump_json())
    assert checked_state(settings, "fix it") == "complete"


def test_a_run_started_with_other_settings_names_the_keys_and_the_remedy(tmp_path):
    settings = load_settings(None, {"run": {"run_dir": tmp_path / "run"}, "optim": {"steps": 3}})
    materialise_run(settings, 1)
    other = load_settings(None, {"run": {"run_dir": tmp_path / "run"}, "optim": {"steps": 3, "lr": 0.5}})
    with pytest.raises(
        ConflictError, match=r"run was started with other settings \(optim.lr differ\); pick another"
    ):
        checked_state(other, "pick another")
