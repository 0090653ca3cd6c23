"""Every query of the Grafana dashboard reads metrics the code actually exports, and the panels are
in the order operators look at them: controller horizon first, then loss allocation, then health."""

import json
from pathlib import Path

from exported_metrics import (
    PROMETHEUS_BUILTINS,
    all_exported_names,
    exported_names,
    metric_names_in,
    registries,
)

DASHBOARD = Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "turnopd.json"


def queries(dashboard: dict) -> list[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [a["expr"] for a in dashboard["annotations"]["list"] if "expr" in a]
    exprs += [
        v["query"]["query"] for v in dashboard["templating"]["list"] if isinstance(v.get("query"), dict)
    ]
    return exprs


def test_every_expr_reads_an_exported_metric():
    dashboard = json.loads(DASHBOARD.read_text())
    exported = all_exported_names() | PROMETHEUS_BUILTINS
    exprs = queries(dashboard)
    assert len(exprs) > 30
    unknown = {name: expr for expr in exprs for name in metric_names_in(expr) if name not in exported}
    assert unknown == {}
    assert all(metric_names_in(expr) for expr in exprs)  # no query reads nothing


def test_each_exporter_is_on_the_dashboard():
    text = " ".join(queries(json.loads(DASHBOARD.read_text())))
    for name, registry in registries().items():
        shown = {n for n in exported_names(registry) if n in text}
        assert len(shown) >= 4, name


def test_first_row_is_the_controller_horizon_then_loss_then_health():
    panels = json.loads(DASHBOARD.read_text())["panels"]
    rows = [i for i, p in enumerate(panels) if p["type"] == "row"]
    first, second, third = (panels[a + 1 : b] for a, b in zip(rows, [*rows[1:], len(panels)], strict=True))
    first_text = json.dumps(first)
    for name in ("h_eff", "h_cov", "h_hat", "h_bar", "probe", "alpha"):
        assert f"turnopd_controller_{name}" in first_text, name
    assert any(p["type"] == "heatmap" and "turn_loss_share" in json.dumps(p) for p in second)
    assert "turnopd_learner_deep_loss_budget" in json.dumps(second)
    assert "up{" in json.dumps(third) and "turnopd_teacher_" in json.dumps(third)
    ys = [p["gridPos"]["y"] for p in panels]
    assert ys == sorted(ys)
