"""bench/depth_bound.py on the frontier's committed records, and its refusals."""

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from bench_scripts import bench_script

from services.run_dir import TURN_STATS_FILE

REPO = Path(__file__).resolve().parents[3]
RECORDS = REPO / "docs" / "results" / "records" / "frontier-2026-11-29"
depth_bound_bench = bench_script("depth_bound")


def run_bench(monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    monkeypatch.setattr(sys, "argv", ["depth_bound.py", *args])
    depth_bound_bench.main()


def rows(text: str) -> dict[str, list[float]]:
    """The first table's rows: schedule -> its ratios (the last cell, successes kept, as a fraction)."""
    table = text.split("### ")[1]
    out = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"[\d.]+", cells[1]):
            out[cells[0]] = [float(cells[1]), float(cells[2]), float(cells[3].rstrip("%")) / 100]
    return out


def test_replays_on_the_frontier_records_order_as_the_caps_do(monkeypatch, capsys):
    run_bench(monkeypatch, "--records", str(RECORDS), "--ks", "16,20", "--caps", "16,24")
    out = capsys.readouterr().out
    assert "probes: warm-up 3, every 8th step; caps 2..40" in out
    assert out.count("### Depth schedules replayed on vanilla seed") == 2  # the two runs with turn stats
    table = rows(out)
    assert set(table) == {
        *(f"TurnOPD seed {s}{kind}" for s in range(3) for kind in (" as it ran", ", no EMA lag")),
        *(f"{c} turns, {p}" for c in (16, 24) for p in ("with the probes", "no probes")),
    }
    # every fixed-cap row, recomputed from the raw turn stats of vanilla seed 1 (the first table)
    # with the printed fit: the bench's ratios and successes kept to their printed rounding
    a, b = (float(v) for v in re.search(r"one speed: ([\d.]+) s per 1k tokens \+ ([\d.]+) s", out).groups())
    steps = [
        json.loads(line)
        for line in (RECORDS / "vanilla" / "seed1" / TURN_STATS_FILE).read_text().splitlines()
    ]

    def cost(step: dict, cap: int) -> float:
        kilo = sum(sum(t["turn_tokens"][:cap]) for t in step["trajectories"]) / 1000
        return a * kilo + b * kilo * kilo / len(step["trajectories"])

    for cap, probes in ((c, p) for c in (16, 24) for p in (True, False)):
        caps = [40 if probes and (k <= 3 or k % 8 == 0) else cap for k in range(1, len(steps) + 1)]
        ratios = [
            sum(cost(s, 40) for s in steps[:k])
            / sum(cost(s, c) for s, c in zip(steps[:k], caps[:k], strict=True))
            for k in (16, 20)
        ]
        wins = [
            len(t["turn_tokens"]) <= c
            for s, c in zip(steps, caps, strict=True)
            for t in s["trajectories"]
            if t["success"]
        ]
        printed = table[f"{cap} turns, {'with the probes' if probes else 'no probes'}"]
        # the printed ratios round the fit's a and b; the kept share is exact to its rounding
        assert printed[:2] == pytest.approx(ratios, abs=0.011)
        assert printed[2] == pytest.approx(sum(wins) / len(wins), abs=0.005)
    for c in (16, 24):
        assert table[f"{c} turns, no probes"][0] > table[f"{c} turns, with the probes"][0]
    for s in range(3):  # the controller's own targets without the EMA cut deeper than the EMA did
        assert table[f"TurnOPD seed {s}, no EMA lag"][0] > table[f"TurnOPD seed {s} as it ran"][0] > 1.0


def test_bad_arguments_and_records_without_turn_stats_are_named(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match=r"--ks takes whole numbers separated by commas, got '16,x'"):
        run_bench(monkeypatch, "--records", str(RECORDS), "--ks", "16,x")
    with pytest.raises(SystemExit, match=r"--caps takes whole numbers >= 1, got '0'"):
        run_bench(monkeypatch, "--records", str(RECORDS), "--caps", "0")
    copy = tmp_path / "records"
    shutil.copytree(RECORDS, copy)
    for stats in copy.glob("vanilla/seed*/turn_stats.jsonl"):
        stats.unlink()
    with pytest.raises(SystemExit, match=r"needs TurnOPD runs and a vanilla run with its turn_stats.jsonl"):
        run_bench(monkeypatch, "--records", str(copy))
    with pytest.raises(SystemExit, match=r"depth_bound: not a directory: .*missing"):
        run_bench(monkeypatch, "--records", str(tmp_path / "records" / "vanilla" / "seed0" / "missing"))
