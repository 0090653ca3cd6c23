"""The committed example inputs are exactly what scripts/make_examples.py writes."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_examples_regenerate_identically(tmp_path):
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_examples.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    for rel in ("probes.jsonl", "vanilla_run/turn_stats.jsonl"):
        assert (tmp_path / rel).read_bytes() == (REPO / "examples" / rel).read_bytes(), rel
