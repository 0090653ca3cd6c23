"""`turnopd compare` + `turnopd report` end to end on the tiny zoo: two methods, one seed, every service real.

summary.json is checked against a direct reading of the runs' own eval.jsonl and metrics.jsonl; a
run cut short (its last step's log lines lost, its checkpoint kept) is resumed by the next compare.
"""

import json
import statistics
from pathlib import Path

import pytest
from PIL import Image
from rollout_fixtures import zoo_cache_dir

from services.cache_dir import resolve_cache_dir
from services.cli.main import main
from services.contracts.experiments import ComparisonSummary
from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.contracts.records import TurnStatsRecord

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
STEPS = 4
LOGS = ("metrics.jsonl", "turn_stats.jsonl", "controller.jsonl", "eval.jsonl")


def compare_config(tmp_path: Path) -> Path:
    """configs/smoke.toml on the test zoo and games, evaluated before step 1 and after every step."""
    games = resolve_cache_dir() / "test-fixtures" / "envs"
    text = (REPO / "configs" / "smoke.toml").read_text()
    text = text.replace("[env_gateway]\n", f'[env_gateway]\ncache_dir = "{games}"\n')
    text = text.replace("[models]\n", f'[models]\ncache_dir = "{zoo_cache_dir()}"\n')
    text = text.replace("interval = 3", "interval = 1").replace("at_start = false", "at_start = true")
    path = tmp_path / "compare.toml"
    path.write_text(text)
    return path


def last_four(evals: list[EvalRecord], cutoff_s: float | None = None) -> list[float]:
    kept = [e for e in evals if e.step <= STEPS and (cutoff_s is None or e.cumulative_s <= cutoff_s)]
    return [e.avg_at_n for e in sorted(kept, key=lambda e: e.step)[-4:]]


def compare(config: Path, out: Path) -> None:
    args = ["compare", "--config", config, "--methods", "turnopd,vanilla", "--seeds", "1", "--steps", STEPS]
    assert main([str(a) for a in [*args, "--out", out]]) == 0


def test_compare_then_report(ray_session, tmp_path, capsys):
    config, out = compare_config(tmp_path), tmp_path / "cmp"
    compare(config, out)
    summary = ComparisonSummary.model_validate_json((out / "summary.json").read_text())
    assert list(summary.methods) == ["turnopd", "vanilla"] and summary.steps == STEPS

    logs = {}
    for method in ("turnopd", "vanilla"):
        run = out / method / "seed0"
        metrics = read_jsonl(run / "metrics.jsonl", StepMetrics)
        evals = read_jsonl(run / "eval.jsonl", EvalRecord)
        assert [m.step for m in metrics] == [1, 2, 3, 4] and {m.method for m in metrics} == {method}
        assert [e.step for e in evals] == [0, 1, 2, 3, 4]
        turn_stats = read_jsonl(run / "turn_stats.jsonl", TurnStatsRecord)
        assert all(t.turn_entropy_sum is not None for r in turn_stats for t in r.trajectories)
        entropies = [h for r in turn_stats for t in r.trajectories for h in t.turn_entropy_sum or []]
        assert min(entropies) >= 0.0 and max(entropies) > 0.0
        logs[method] = (metrics, evals)
    walls = {m: metrics[-1].cumulative_s for m, (metrics, _) in logs.items()}
    cutoff = min(walls.values())
    assert summary.least_time_cutoff_s == {"0": cutoff}
    for method, (metrics, evals) in logs.items():
        entry = summary.methods[method]
        assert entry.same_step_acc == statistics.fmean(last_four(evals))
        assert entry.same_step_std == statistics.pstdev(last_four(evals))
        assert entry.runs[0].same_step.steps == [1, 2, 3, 4]
        assert entry.least_time_acc == statistics.fmean(last_four(evals, cutoff))
        assert entry.wall_time_s == walls[method]
        assert entry.speedup_vs_vanilla == walls["vanilla"] / walls[method]
        assert entry.runs[0].mean_h_roll == statistics.fmean(m.h_roll for m in metrics)
        for task_type, score in entry.per_task_type.items():
            values = [e.per_task_type[task_type] for e in evals if e.step >= 1]
            assert score.same_step_acc == statistics.fmean(values)
    assert all(m.h_roll == 6 for m in logs["vanilla"][0])  # vanilla: full depth every step

    # Lose vanilla's last step from the logs (its checkpoint stays) and the evaluation after step 2:
    # the next compare drops the orphan checkpoint, resumes vanilla from step 2's checkpoint, redoes
    # that evaluation first, and reuses the complete turnopd run.
    vanilla = out / "vanilla" / "seed0"
    assert (vanilla / "checkpoints" / "step_000004").is_dir()
    for name in LOGS:
        last = 1 if name == "eval.jsonl" else STEPS - 1
        lines = [ln for ln in (vanilla / name).read_text().splitlines() if json.loads(ln)["step"] <= last]
        (vanilla / name).write_text("".join(ln + "\n" for ln in lines))
    turnopd_before = (out / "turnopd" / "seed0" / "metrics.jsonl").read_text()
    capsys.readouterr()
    compare(config, out)
    err = capsys.readouterr().err
    assert "turnopd seed 0: complete" in err and "vanilla seed 0: partial" in err
    assert (out / "turnopd" / "seed0" / "metrics.jsonl").read_text() == turnopd_before
    resumed = read_jsonl(vanilla / "metrics.jsonl", StepMetrics)
    redone = read_jsonl(vanilla / "eval.jsonl", EvalRecord)
    assert [m.step for m in resumed] == [1, 2, 3, 4] and [e.step for e in redone] == [0, 1, 2, 3, 4]
    assert redone[2].cumulative_s == resumed[1].cumulative_s == logs["vanilla"][0][1].cumulative_s
    # synchronous, so exact: steps 3 and 4 replayed on step 2's weights with the same seeds
    played = logs["vanilla"][0]
    assert [m.loss for m in resumed[2:]] == pytest.approx([m.loss for m in played[2:]], rel=1e-3)
    again = ComparisonSummary.model_validate_json((out / "summary.json").read_text())
    assert again.methods["turnopd"].same_step_acc == summary.methods["turnopd"].same_step_acc

    report = tmp_path / "report"
    assert main(["report", str(out), "--out", str(report)]) == 0
    pngs = sorted(p.name for p in report.glob("*.png"))
    assert len(pngs) == 9 and "frontier.png" in pngs and "vanilla_seed0_kl.png" in pngs
    for name in pngs:
        assert (report / name).stat().st_size > 10_000
        with Image.open(report / name) as image:
            assert image.size[0] >= 600
    page = (report / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 9 and "Main comparison (4 steps)" in page
    assert (report / "report.md").read_text().count("| vanilla |") >= 1
