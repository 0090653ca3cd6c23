"""bench/multi_env.py's sittings and its before/after check, on run directories written by hand (the
runs themselves are `pipeline.train`'s, tested with it)."""

import json
from pathlib import Path

import pytest
from bench_scripts import bench_script
from comparison_logs import eval_record, step_metrics, turn_stats

from services.errors import ConflictError
from services.run_dir import RunDir
from services.settings import load_settings

multi_env_bench = bench_script("multi_env")

CONFIG = """
[optim]
steps = 2
[eval]
interval = 2
episodes = 20
val_n = 1
at_start = true
"""


def complete_run(tmp_path: Path, before: float, after: float) -> tuple[Path, Path]:
    """A config and, under ``root/alone``, a complete 2-step run of it as the bench saves it."""
    config = tmp_path / "bench.toml"
    config.write_text(CONFIG)
    root = tmp_path / "keep"
    own = {"run": {"run_dir": root / "alone"}, "metrics": {"enabled": False}}
    settings = load_settings(config, own)
    run = RunDir(settings.run.run_dir)
    run.create(settings)
    for k in (1, 2):
        run.append("metrics.jsonl", step_metrics(k, 10.0).model_dump_json())
        run.append("turn_stats.jsonl", turn_stats(k, 0.0, probe=k == 1).model_dump_json())
    for k, acc in ((0, before), (2, after)):
        run.append(
            "eval.jsonl", eval_record(k, 10.0 * k, acc).model_copy(update={"episodes": 20}).model_dump_json()
        )
    return config, root


def test_a_complete_run_is_read_not_trained_again(tmp_path: Path) -> None:
    config, root = complete_run(tmp_path, before=0.05, after=0.6)
    (root / multi_env_bench.TIMES_FILE).write_text(
        json.dumps({"alone": {"wall_s": 42.0, "cpu": 0.8, "resumed": False}})
    )
    figures = multi_env_bench.run_once(config, "alone", {}, root)  # would start Ray if it trained
    assert (figures.wall_s, figures.cpu, figures.resumed, figures.steps_s) == (42.0, 0.8, False, 20.0)
    [env] = figures.envs
    assert (env.before, env.success, env.eval_episodes, env.h_hat) == (0.05, 0.6, 20, [6, 6])
    assert multi_env_bench.rate_text(env.before, 20) == "1/20 (1-24%)"
    assert multi_env_bench.above(env, env.before) == "yes"  # 12/20 (39-78%) over 1/20 (1-24%)
    # its time never written (stopped after the last step): read all the same, marked resumed
    (root / multi_env_bench.TIMES_FILE).unlink()
    assert multi_env_bench.run_once(config, "alone", {}, root).resumed


def test_overlapping_intervals_are_no_gain_and_a_missing_start_is_unknown(tmp_path: Path) -> None:
    config, root = complete_run(tmp_path, before=0.1, after=0.3)
    figures = multi_env_bench.run_once(config, "alone", {}, root)
    [env] = figures.envs
    assert multi_env_bench.above(env, env.before) == "no"  # 6/20 (15-52%) against 2/20 (3-30%)
    assert multi_env_bench.above(env, None) == "-" and multi_env_bench.rate_text(None, 20) == "-"


def test_a_kept_run_of_other_settings_is_refused(tmp_path: Path) -> None:
    config, root = complete_run(tmp_path, before=0.1, after=0.3)
    with pytest.raises(ConflictError, match=r"keep/alone was started with other settings \(optim.lr"):
        multi_env_bench.run_once(config, "alone", {"optim": {"lr": 1e-3}}, root)
