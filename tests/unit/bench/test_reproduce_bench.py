"""bench/reproduce_records.py on a recorded run of the repository and a reproduction written from it
(the training itself is `pipeline.train`'s, tested with it)."""

import sys
from pathlib import Path

import pytest
from bench_scripts import bench_script

from services.experiments.run_start import differences_from_plan
from services.run_dir import RunDir

REPO = Path(__file__).resolve().parents[3]
RECORD = REPO / "docs" / "results" / "records" / "frontier-2026-11-29" / "turnopd" / "seed0"
reproduce_bench = bench_script("reproduce_records")


def first_lines(path: Path, n: int) -> str:
    return "".join(path.read_text().splitlines(keepends=True)[:n])


def reproduction(tmp_path: Path, steps: int) -> Path:
    """A complete reproduction of the record's first ``steps`` steps, its logs copied from it."""
    settings = reproduce_bench.reproduction_settings(RECORD, tmp_path / "out")
    run = RunDir(settings.run.run_dir)
    run.create(settings)
    (run.root / "metrics.jsonl").write_text(first_lines(RECORD / "metrics.jsonl", steps))
    (run.root / "eval.jsonl").write_text(
        first_lines(RECORD / "eval.jsonl", 1 + steps // 4)
    )  # steps 0, 4, ...
    return run.root


def run_bench(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["reproduce_records.py", *args])
    with pytest.raises(SystemExit) as exit_:
        reproduce_bench.main()
    return int(exit_.value.code or 0)


def test_the_record_is_run_again_unchanged_but_for_its_place(tmp_path):
    settings = reproduce_bench.reproduction_settings(RECORD, tmp_path / "out")
    assert settings.run.run_dir == (tmp_path / "out" / "turnopd-seed0").resolve()
    assert settings.optim.steps == 32 and settings.pipeline.max_staleness == 0  # K kept: alpha = k / 32
    differ = differences_from_plan((RECORD / "config.json").read_text(), settings)
    assert differ == ["run.run_id"]


def test_equal_logs_pass_and_a_changed_step_fails_naming_it(tmp_path, monkeypatch, capsys):
    mine = reproduction(tmp_path, 8)
    args = ("--record", str(RECORD), "--steps", "8", "--out", str(tmp_path / "out"))
    assert run_bench(monkeypatch, *args) == 0  # its logs reach step 8: compared, not trained
    out = capsys.readouterr().out
    assert "steps 1..8, evaluations at [0, 4, 8]" in out and "every compared field equal (exactly)" in out
    lines = (mine / "metrics.jsonl").read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace('"h_roll":', '"h_roll":1', 1)  # step 6 played to another depth
    (mine / "metrics.jsonl").write_text("".join(lines))
    assert run_bench(monkeypatch, *args) == 1
    assert "metrics.jsonl step 6 h_roll: recorded" in capsys.readouterr().out
