"""The installed `turnopd` console script works end to end (needs `scripts/setup.sh`)."""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def test_turnopd_entry_point_runs_replay_and_reports_errors_in_one_line(tmp_path):
    exe = shutil.which("turnopd")
    assert exe, "the turnopd console script is not installed; run scripts/setup.sh"
    ok = subprocess.run(
        [exe, "controller", "replay", str(REPO / "examples" / "probes.jsonl"), "--steps", "5"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == 5
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 1, "kl_per_turn": [1e999], "survivors": [1]}\n')
    fail = subprocess.run([exe, "controller", "replay", str(bad)], capture_output=True, text=True)
    assert fail.returncode == 2
    assert fail.stderr.strip().splitlines() == [
        f"error: {bad}:1: kl_per_turn.0: Input should be a finite number"
    ]
