"""`turnopd report` on hand-made run directories (no training): figures, tables, HTML, errors."""

import json

from comparison_logs import run_logs, write_run
from PIL import Image

from services.experiments.compare_dir import SUMMARY_FILE
from services.experiments.protocols import summarise

TURNOPD = [0.0, 0.5, 0.5, 0.75, 0.75, 1.0, 1.0]
VANILLA = [0.25, 0.25, 0.5, 0.5, 0.5, 0.75, 0.75]
FIGURES = ("kl", "gap", "loss_share", "controller")


def comparison_dir(tmp_path, with_summary):
    root = tmp_path / "cmp"
    runs = [run_logs("turnopd", 0, 5.0, TURNOPD), run_logs("vanilla", 0, 10.0, VANILLA)]
    for logs in runs:
        write_run(root / logs.method / "seed0", logs)
    if with_summary:
        summary = summarise(runs, 6).model_copy(update={"config": "from-summary.toml"})
        (root / SUMMARY_FILE).write_text(summary.model_dump_json())
    return root


def test_report_of_a_comparison_directory(cli, tmp_path):
    out = tmp_path / "report"
    res = cli("report", comparison_dir(tmp_path, with_summary=True), "--out", out, "--smooth", 2)
    assert res.code == 0, res.err
    names = sorted(p.name for p in out.glob("*.png"))
    assert names == sorted(
        ["frontier.png", *(f"{m}_seed0_{f}.png" for m in ("turnopd", "vanilla") for f in FIGURES)]
    )
    for name in names:
        with Image.open(out / name) as image:
            assert image.size[0] >= 600 and image.size[1] >= 400
        assert (out / name).stat().st_size > 10_000
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 9
    assert "<td>87.50 ± 12.50</td>" in page and "Loss allocation" in page and "Run: vanilla seed 0" in page
    md = (out / "report.md").read_text()
    assert "| turnopd | 87.50 ± 12.50 | 87.50 ± 12.50 | 30.0 s | 2.00x |" in md
    assert "![Accuracy-time frontier](frontier.png)" in md and "(vanilla_seed0_controller.png)" in md
    assert "report.html" in res.err and "9 figures" in res.err


def test_report_computes_the_table_without_a_summary(cli, tmp_path):
    root = comparison_dir(tmp_path, with_summary=False)
    out = tmp_path / "report"
    res = cli(
        "report", root / "vanilla" / "seed0", root / "turnopd" / "seed0", "--out", out, "--min-survivors", 1
    )
    assert res.code == 0, res.err
    assert "Comparison computed by the report at K = 6" in res.err
    md = (out / "report.md").read_text()
    assert "| vanilla | 37.50 ± 12.50 | 62.50 ± 12.50 | 60.0 s | 1.00x |" in md
    assert md.index("| turnopd | ") < md.index("| vanilla | ")  # the paper's method order, not the CLI's


def test_report_errors_are_one_line(cli, tmp_path):
    res = cli("report", tmp_path / "missing", "--out", tmp_path / "r")
    assert res.code == 2 and res.err.startswith("error: not a directory")
    root = comparison_dir(tmp_path, with_summary=False)
    (root / "vanilla" / "seed0" / "turn_stats.jsonl").write_text(json.dumps({"step": 1}) + "\n")
    res = cli("report", root, "--out", tmp_path / "r")
    assert res.code == 2 and "turn_stats.jsonl:1" in res.err
    res = cli("report", root / "turnopd" / "seed0", "--out", tmp_path / "r", "--smooth", 0)
    assert res.code == 2 and "--smooth must be >= 1" in res.err
