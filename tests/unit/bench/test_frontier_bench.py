"""bench/frontier.py --analyse-only on run directories laid out as `turnopd compare` leaves them."""

import json
import sys
from pathlib import Path

import pytest
from bench_scripts import bench_script
from comparison_logs import run_logs

from services.experiments.compare_plan import run_settings
from services.experiments.system_arms import SYSTEM_OVERRIDES
from services.run_dir import RunDir

frontier_bench = bench_script("frontier")

CONFIG = """
[optim]
steps = 3
[eval]
interval = 1
episodes = 4
val_n = 1
"""
ACCS = {"turnopd": [0.0, 0.5, 0.75, 0.75], "vanilla": [0.0, 0.25, 0.5, 0.5]}
STEP_S = {"turnopd": 5.0, "vanilla": 10.0}


def write_runs(
    config: Path,
    out: Path,
    accs: dict[str, list[float]] = ACCS,
    step_s: dict[str, float] = STEP_S,
    overrides: dict | None = None,
) -> None:
    """A complete two-seed comparison of ``config`` under ``out`` (every run's config as compare
    saves it)."""
    for method, method_accs in accs.items():
        for seed in (0, 1):
            settings = run_settings(config, method, seed, None, out, overrides)  # type: ignore[arg-type]
            run = RunDir(settings.run.run_dir)
            run.create(settings)
            logs = run_logs(method, seed, step_s[method], method_accs)
            (run.root / "metrics.jsonl").write_text("".join(m.model_dump_json() + "\n" for m in logs.metrics))
            (run.root / "eval.jsonl").write_text("".join(e.model_dump_json() + "\n" for e in logs.evals))


def comparison(tmp_path: Path) -> tuple[Path, Path]:
    """A config and a complete two-seed comparison of it."""
    config = tmp_path / "frontier.toml"
    config.write_text(CONFIG)
    out = tmp_path / "frontier"
    write_runs(config, out)
    return config, out


def run_bench(monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    monkeypatch.setattr(sys, "argv", ["frontier.py", *args])
    frontier_bench.main()


def test_analyse_only_writes_the_figure_page_and_json(tmp_path, monkeypatch, capsys):
    config, out = comparison(tmp_path)
    run_bench(
        monkeypatch, "--config", str(config), "--out", str(out), "--seeds", "2", "--analyse-only",
        "--teacher-success", "0.8", "--teacher-episodes", "60",
    )  # fmt: skip
    data = json.loads((out / "frontier.json").read_text())
    # vanilla's Same-Step: steps 0..3 = (0 + .25 + .5 + .5) / 4 = 0.3125; 90% of it = 0.28125
    assert data["threshold"] == pytest.approx(0.28125)
    # TurnOPD reaches it at step 1 (5 s), vanilla at step 2 (20 s)
    assert data["time_ratio_vanilla_over_turnopd"] == pytest.approx(4.0)
    assert data["methods"]["turnopd"]["best_over_teacher"] == pytest.approx(0.75 / 0.8)
    assert data["teacher"]["note"] == "given by --teacher-success (60 episodes)"
    assert (out / "frontier.png").stat().st_size > 0 and (out / "summary.json").is_file()
    assert "4.00x (target >= 1.5x)" in (out / "frontier.md").read_text()
    printed = capsys.readouterr()
    assert "# Accuracy-time frontier (turnopd, vanilla; 2 seeds)" in printed.out
    # every fixture step trains 100 tokens over 4 episodes: no step-cost fit, so no table at one speed
    assert (
        "frontier: no table at one machine speed: the step-cost fit needs steps of different" in printed.err
    )
    assert data["one_speed"] is None and "one machine speed" not in (out / "frontier.md").read_text()
    # the bench hands every run to the page's per-run table, read from the run directories
    assert [(r["method"], r["seed"], r["steps"]) for r in data["runs"]] == [
        ("turnopd", 0, 3), ("turnopd", 1, 3), ("vanilla", 0, 3), ("vanilla", 1, 3)
    ]  # fmt: skip
    assert "### Each run" in (out / "frontier.md").read_text()
    # and its steps by depth (the fixtures play every step to the same depth: all full)
    kinds = sorted((k["method"], k["seed"], k["full"]["steps"], k["truncated"]) for k in data["step_kinds"])
    assert kinds == [(m, s, 3, None) for m in ("turnopd", "vanilla") for s in (0, 1)]
    assert "### Full-depth and truncated steps" in (out / "frontier.md").read_text()


def test_teacher_measured_on_other_games_is_named(tmp_path, monkeypatch):
    config, out = comparison(tmp_path)
    run_bench(monkeypatch, "--config", str(config), "--out", str(out), "--seeds", "2", "--analyse-only")
    teacher = json.loads((out / "frontier.json").read_text())["teacher"]
    assert teacher["score"] is None and teacher["note"].endswith("pass --teacher-success")


def test_incomplete_runs_and_a_missing_config_are_named(tmp_path, monkeypatch):
    config, out = comparison(tmp_path)
    metrics = out / "vanilla" / "seed1" / "metrics.jsonl"
    metrics.write_text("".join(metrics.read_text().splitlines(keepends=True)[:2]))
    with pytest.raises(SystemExit, match=r"not complete: vanilla seed 1 \(partial\)"):
        run_bench(monkeypatch, "--config", str(config), "--out", str(out), "--seeds", "2", "--analyse-only")
    with pytest.raises(SystemExit, match=r"config not found: .*missing\.toml"):
        run_bench(monkeypatch, "--config", str(tmp_path / "missing.toml"), "--out", str(out))


def test_teacher_options_are_checked(tmp_path, monkeypatch):
    config, out = comparison(tmp_path)
    with pytest.raises(SystemExit, match="give both"):
        run_bench(monkeypatch, "--config", str(config), "--out", str(out), "--teacher-episodes", "60")
    with pytest.raises(SystemExit, match=r"a rate in \[0, 1\], got 80.0"):
        run_bench(monkeypatch, "--config", str(config), "--out", str(out), "--teacher-success", "80")
    with pytest.raises(SystemExit, match=r"--teacher-episodes must be >= 1, got 0"):
        run_bench(
            monkeypatch, "--config", str(config), "--out", str(out), "--seeds", "2", "--analyse-only",
            "--teacher-success", "0.8", "--teacher-episodes", "0",
        )  # fmt: skip


def test_records_carry_complete_runs_to_another_directory(tmp_path, monkeypatch, capsys):
    """--records keeps each complete run's logs; on a machine without the runs, they are analysed
    from the records alone (no training: --analyse-only would refuse a missing run)."""
    config, out = comparison(tmp_path)
    records = tmp_path / "records"
    common = ["--config", str(config), "--seeds", "2", "--analyse-only", "--teacher-success", "0.8"]
    run_bench(monkeypatch, *common, "--out", str(out), "--records", str(records))
    assert sorted(p.parent.name + "/" + p.name for p in records.glob("*/seed*")) == [
        "turnopd/seed0", "turnopd/seed1", "vanilla/seed0", "vanilla/seed1",
    ]  # fmt: skip
    assert "4 complete runs recorded" in capsys.readouterr().err
    elsewhere = tmp_path / "elsewhere"
    run_bench(monkeypatch, *common, "--out", str(elsewhere), "--records", str(records))
    assert (
        "taken from" in capsys.readouterr().err and (elsewhere / "vanilla" / "seed1" / "eval.jsonl").is_file()
    )
    assert json.loads((elsewhere / "frontier.json").read_text()) == json.loads(
        (out / "frontier.json").read_text()
    )


def test_system_arms_are_set_against_synchronous_vanilla(tmp_path, monkeypatch, capsys):
    """--system: the pipelined arms' runs (their own directory and records) under their arms' names
    beside the synchronous ones, each arm's time to the threshold over vanilla's."""
    config, out = comparison(tmp_path)
    # the pipelined steps take 2.5 s (TurnOPD) and 8 s (vanilla); each learns as its synchronous arm
    write_runs(config, out / "system", step_s={"turnopd": 2.5, "vanilla": 8.0}, overrides=SYSTEM_OVERRIDES)
    records = tmp_path / "records"
    run_bench(
        monkeypatch, "--config", str(config), "--out", str(out), "--seeds", "2", "--analyse-only",
        "--system", "--records", str(records), "--teacher-success", "0.8",
    )  # fmt: skip
    data = json.loads((out / "frontier.json").read_text())
    assert list(data["methods"]) == ["turnopd", "vanilla", "turnopd-system", "vanilla-pipelined"]
    assert data["threshold"] == pytest.approx(0.28125)  # the synchronous vanilla's, as without --system
    ratio = {m: d["reach"]["vanilla_over_it"] for m, d in data["methods"].items()}
    # reached at step 1 (5 s, 2.5 s) and step 2 (20 s, 16 s)
    assert ratio == pytest.approx(
        {"turnopd": 4.0, "vanilla": 1.0, "turnopd-system": 8.0, "vanilla-pipelined": 1.25}
    )
    page = (out / "frontier.md").read_text()
    assert "vanilla / turnopd-system: 8.00x (target >= 2.3x)." in page
    assert "| turnopd-system | 2.5 s (step 1) | 2.5 s (step 1) | 2.5 s | 2/2 | 8.00x |" in page
    # each group keeps its own summary and records; the system runs' configs hold the pipelined step
    assert (out / "system" / "summary.json").is_file() and (records / "system" / "turnopd" / "seed1").is_dir()
    saved = json.loads((records / "system" / "vanilla" / "seed0" / "config.json").read_text())
    assert saved["pipeline"] == {"max_staleness": 1, "stream_teacher": True}
    err = capsys.readouterr().err
    assert (
        f"4 complete runs recorded in {records}\n" in err
        and f"4 complete runs recorded in {records / 'system'}\n" in err
    )


def test_system_runs_of_other_settings_are_refused(tmp_path, monkeypatch):
    config, out = comparison(tmp_path)
    write_runs(config, out / "system")  # the synchronous step where the system arm's belongs
    with pytest.raises(SystemExit, match=r"system/turnopd/seed0 was started with other settings \(pipeline"):
        run_bench(
            monkeypatch,
            "--config",
            str(config),
            "--out",
            str(out),
            "--seeds",
            "2",
            "--analyse-only",
            "--system",
        )
