"""Planning a comparison: run layout, reuse/resume decisions, config conflicts, method names."""

import json

import pytest
from comparison_logs import eval_record, materialise_run, run_logs, write_run

from services.errors import ConflictError, InputError
from services.experiments.compare_dir import (
    config_differences,
    load_run,
    run_dirs_under,
    run_path,
    run_state,
)
from services.experiments.compare_plan import parse_methods, plan_runs, run_settings


def test_parse_methods_keeps_order_and_rejects_bad_names():
    assert parse_methods("turnopd, vanilla,tcod") == ["turnopd", "vanilla", "tcod"]
    with pytest.raises(InputError, match="unknown method 'grpo'"):
        parse_methods("turnopd,grpo")
    with pytest.raises(InputError, match="listed twice"):
        parse_methods("vanilla,vanilla")
    with pytest.raises(InputError, match="no method"):
        parse_methods(" , ")


def test_config_differences_are_dotted_and_skip_the_run_dir():
    saved = {"run": {"run_dir": "/a", "seed": 0}, "optim": {"steps": 4, "lr": 1e-4}}
    wanted = {"run": {"run_dir": "/b", "seed": 0}, "optim": {"steps": 6, "lr": 1e-4}, "new": 1}
    assert config_differences(saved, wanted) == ["new", "optim.steps"]
    assert config_differences(saved, saved) == []


def test_run_state_new_partial_complete(tmp_path):
    assert run_state(tmp_path / "x", 6) == "new"
    logs = run_logs("vanilla", 0, 10.0, [0.5] * 7)
    path = write_run(tmp_path / "v", logs)
    assert run_state(path, 6) == "complete"
    assert run_state(path, 7) == "partial"
    (path / "eval.jsonl").write_text(eval_record(0, 0.0, 0.5).model_dump_json() + "\n")
    assert run_state(path, 6) == "partial"
    loaded = load_run(path)
    assert (loaded.method, loaded.seed, [m.step for m in loaded.metrics]) == (
        "vanilla",
        0,
        [1, 2, 3, 4, 5, 6],
    )


def test_plan_reuses_complete_runs_resumes_partial_ones_and_refuses_other_configs(tmp_path):
    out = tmp_path / "cmp"
    first = plan_runs(None, ["turnopd", "vanilla"], 2, 3, out)
    assert [(p.method, p.seed, p.state) for p in first] == [
        ("turnopd", 0, "new"),
        ("turnopd", 1, "new"),
        ("vanilla", 0, "new"),
        ("vanilla", 1, "new"),
    ]
    vanilla_1 = first[3].settings
    assert vanilla_1.run.run_dir == run_path(out.resolve(), "vanilla", 1)
    assert vanilla_1.run.run_id == "cmp-vanilla-seed1" and vanilla_1.run.method == "vanilla"
    assert vanilla_1.optim.steps == 3 and vanilla_1.run.seed == 1
    materialise_run(first[0].settings, 3)
    materialise_run(first[1].settings, 2)
    again = plan_runs(None, ["turnopd", "vanilla"], 2, 3, out)
    assert [p.state for p in again] == ["complete", "partial", "new", "new"]
    with pytest.raises(ConflictError, match=r"seed0 was started with other settings \(optim.steps"):
        plan_runs(None, ["turnopd"], 1, 5, out)
    with pytest.raises(InputError, match="--seeds must be >= 1"):
        plan_runs(None, ["turnopd"], 0, 3, out)


def test_keys_added_to_the_settings_since_a_run_started_count_as_their_defaults(tmp_path):
    out, config = tmp_path / "cmp", tmp_path / "c.toml"
    (planned,) = plan_runs(None, ["vanilla"], 1, 3, out)
    materialise_run(planned.settings, 2)
    saved = planned.settings.run.run_dir / "config.json"
    older = json.loads(saved.read_text())
    del older["learner"]["checkpoint_every"], older["eval"]
    older["sft"] = {"checkpoint_every": 50}  # saved before [sft] moved to the teacher recipes
    saved.write_text(json.dumps(older))
    assert [p.state for p in plan_runs(None, ["vanilla"], 1, 3, out)] == ["partial"]
    config.write_text("[learner]\ncheckpoint_every = 7\n")
    with pytest.raises(ConflictError, match=r"\(learner.checkpoint_every differ\)"):
        plan_runs(config, ["vanilla"], 1, 3, out)


def test_seeds_start_at_the_configs_seed(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[run]\nseed = 5\n")
    planned = plan_runs(config, ["tcod"], 2, None, tmp_path / "out")
    assert [p.seed for p in planned] == [5, 6]
    assert (
        planned[0].settings.optim.steps == run_settings(config, "tcod", 5, None, tmp_path / "out").optim.steps
    )


def test_run_dirs_under_a_comparison_or_a_single_run(tmp_path):
    a = write_run(tmp_path / "cmp" / "turnopd" / "seed0", run_logs("turnopd", 0, 1.0, [0.5, 0.5]))
    b = write_run(tmp_path / "cmp" / "vanilla" / "seed0", run_logs("vanilla", 0, 1.0, [0.5, 0.5]))
    assert run_dirs_under(tmp_path / "cmp") == [a, b]
    assert run_dirs_under(a) == [a]
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no run directory"):
        run_dirs_under(tmp_path / "empty")
