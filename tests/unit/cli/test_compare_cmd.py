"""`turnopd compare` without training: complete runs are only scored; bad input is one line."""

import json

from comparison_logs import run_logs, write_run

from services.contracts.experiments import ComparisonSummary
from services.experiments.compare_dir import settings_json
from services.experiments.compare_plan import run_settings
from services.run_dir import SECRET_FIELDS

TURNOPD = [0.0, 0.5, 0.5, 0.75, 0.75, 1.0, 1.0]
VANILLA = [0.25, 0.25, 0.5, 0.5, 0.5, 0.75, 0.75]


def complete_comparison(out):
    """Two finished runs exactly as `turnopd compare --steps 6 --out OUT` would have left them."""
    for method, step_s, accs in (("turnopd", 5.0, TURNOPD), ("vanilla", 10.0, VANILLA)):
        settings = run_settings(None, method, 0, 6, out)
        path = write_run(settings.run.run_dir, run_logs(method, 0, step_s, accs))
        (path / "config.json").write_text(json.dumps(settings_json(settings, SECRET_FIELDS)))


def test_complete_runs_are_reused_and_scored(cli, tmp_path):
    out = tmp_path / "cmp"
    complete_comparison(out)
    res = cli("compare", "--methods", "turnopd,vanilla", "--steps", 6, "--out", out)
    assert res.code == 0, res.err
    assert "turnopd seed 0: complete" in res.err and "vanilla seed 0: complete" in res.err
    summary = ComparisonSummary.model_validate_json((out / "summary.json").read_text())
    assert (summary.methods["turnopd"].same_step_acc, summary.methods["vanilla"].least_time_acc) == (
        0.875,
        0.375,
    )
    assert summary.methods["turnopd"].speedup_vs_vanilla == 2.0 and summary.config is None
    assert "| turnopd | 87.50 ± 12.50 | 87.50 ± 12.50 | 30.0 s | 2.00x |" in (out / "summary.md").read_text()
    assert "turnopd" in res.out and "2.00x" in res.out  # the table on stdout


def test_bad_input_is_one_line(cli, tmp_path):
    out = tmp_path / "cmp"
    res = cli("compare", "--methods", "turnopd,ppo", "--out", out)
    assert res.code == 2 and res.err.strip() == (
        "error: unknown method 'ppo'; choose from turnopd, vanilla, adaptive-depth, blend, turn-norm, tcod"
    )
    complete_comparison(out)
    res = cli("compare", "--methods", "vanilla", "--steps", 8, "--out", out)
    assert res.code == 2 and "vanilla/seed0 was started with other settings (optim.steps differ)" in res.err
    res = cli("compare", "--seeds", 0, "--out", out)
    assert res.code == 2 and "--seeds must be >= 1" in res.err
