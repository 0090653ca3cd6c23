"""A real Prometheus on loopback with the repo's scrape config, and what a test reads of it.

Prometheus (Debian's package; `scripts/setup.sh --with-prometheus` installs it) runs with
`deploy/prometheus/prometheus.yml`, its targets moved to a test's ports and a 1 s interval;
``ScrapedRun`` waits after every step until Prometheus has scraped it and keeps the controller's
values there, to be checked against what the run logs (tests/integration/test_train_smoke.py).
"""

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from exported_metrics import metric_names_in

from services.contracts.controller import StepDecision
from services.contracts.orchestrator import StepMetrics
from services.loopback import free_loopback_port

REPO = Path(__file__).resolve().parents[1]
SCRAPE_WAIT_S = 30.0
CONTROLLER_SERIES = (
    "step", "h_hat", "h_bar", "h_roll", "h_cov", "h_eff", "h_ctrl", "alpha", "probe", "probes_total"
)  # fmt: skip


def have_prometheus() -> bool:
    return shutil.which("prometheus") is not None


class Prometheus:
    """``prometheus`` on 127.0.0.1 with a config file; ``query`` answers instant queries."""

    def __init__(self, config: Path, data: Path, log: Path) -> None:
        self.url = f"http://127.0.0.1:{free_loopback_port()}"
        command = [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address={self.url.removeprefix('http://')}",
        ]
        self.log = log
        with log.open("wb") as sink:
            self.process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"prometheus exited: {log.read_text()[-2000:]}"
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"prometheus not ready: {log.read_text()[-2000:]}")

    def query(self, promql: str) -> list[dict[str, Any]]:
        body = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=10).json()
        assert body["status"] == "success", (promql, body)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def value(self, promql: str) -> float | None:
        result = self.query(promql)
        assert len(result) <= 1, (promql, result)
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, promql: str, expected: float) -> None:
        deadline = time.monotonic() + SCRAPE_WAIT_S
        while self.value(promql) != expected:
            assert time.monotonic() < deadline, f"{promql} never became {expected}"
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def scrape_config(driver: int, teacher: int, gateway: int) -> dict[str, Any]:
    """The repo's local scrape config with this test's ports and a 1 s interval."""
    config = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    ports = {"turnopd-driver": driver, "turnopd-teacher": teacher, "turnopd-env-gateway": gateway}
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": [f"127.0.0.1:{ports.pop(job['job_name'])}"]}]
    assert ports == {}  # every job of the repo's config was moved
    return config


def dashboard_queries() -> list[str]:
    dashboard = json.loads((REPO / "deploy" / "grafana" / "turnopd.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [a["expr"] for a in dashboard["annotations"]["list"] if "expr" in a]
    # Grafana fills these in before a query reaches Prometheus; any other `$` left would be a typo.
    grafana = {"$namespace": ".*", "$__rate_interval": "30s", "$__range": "1h", "$__interval": "15s"}
    filled = []
    for expr in exprs:
        for name in sorted(grafana, key=len, reverse=True):
            expr = expr.replace(name, grafana[name])
        assert "$" not in expr, f"dashboard query uses a variable the test does not fill: {expr}"
        filled.append(expr)
    return filled


class ScrapedRun:
    """A Prometheus scraping a run's driver, teacher (Serve's HTTP port) and env gateway; ``on_step``
    waits until the step is scraped and keeps the series; ``check`` compares them with the run's logs."""

    def __init__(self, tmp_path: Path, driver: int, teacher: int, gateway: int, steps: int) -> None:
        config = tmp_path / "prometheus.yml"
        config.write_text(yaml.safe_dump(scrape_config(driver, teacher, gateway)))
        self.prometheus = Prometheus(config, tmp_path / "tsdb", tmp_path / "prometheus.log")
        self.steps = steps
        self.seen: dict[int, dict[str, float | None]] = {}
        self.end: dict[str, Any] = {}

    def on_step(self, m: StepMetrics) -> None:
        prometheus = self.prometheus
        prometheus.wait_for("turnopd_controller_step", m.step)  # Prometheus has scraped this step
        self.seen[m.step] = {
            name: prometheus.value(f"turnopd_controller_{name}") for name in CONTROLLER_SERIES
        }
        self.seen[m.step]["learner_loss"] = prometheus.value("turnopd_learner_loss")
        self.seen[m.step]["rollout_weights_version"] = prometheus.value("turnopd_rollout_weights_version")
        if m.step == self.steps:  # every service is still up: look at all of them
            self.end["up"] = {r["metric"]["job"]: r["value"][1] for r in prometheus.query("up")}
            self.end["teacher_ok"] = prometheus.value('sum(turnopd_teacher_requests_total{outcome="ok"})')
            # the training split's only: an evaluation's episodes (its own split) may be in flight
            # beside the last steps when rollouts overlap the learner
            self.end["env_episodes"] = prometheus.value(
                'sum(turnopd_env_episodes_created_total{split="train"})'
            )
            self.end["dashboard"] = {expr: prometheus.query(expr) for expr in dashboard_queries()}

    def stop(self) -> None:
        self.prometheus.stop()

    def check(self, metrics: list[StepMetrics], decisions: list[StepDecision]) -> None:
        """The controller's values as scraped equal the run's logs step by step; every target was up,
        the teacher and gateway counted the run's work, and every dashboard query parses."""
        seen, end = self.seen, self.end
        assert sorted(seen) == [m.step for m in metrics] == [d.step for d in decisions]
        probes = 0
        for m, d in zip(metrics, decisions, strict=True):
            got = seen[m.step]
            probes += m.probe
            assert got["h_hat"] == m.h_hat and got["h_roll"] == m.h_roll
            assert got["h_bar"] == pytest.approx(d.h_bar) and got["h_cov"] == d.h_cov
            assert got["alpha"] == pytest.approx(m.alpha) and got["probe"] == float(m.probe)
            assert got["probes_total"] == probes
            if d.h_eff is not None:
                assert (got["h_eff"], got["h_ctrl"]) == (d.h_eff, d.h_ctrl)
            assert got["learner_loss"] == pytest.approx(m.loss)
            assert got["rollout_weights_version"] == m.rollout_weights_version
        assert end["up"] == {"turnopd-driver": "1", "turnopd-teacher": "1", "turnopd-env-gateway": "1"}
        assert end["teacher_ok"] is not None and end["teacher_ok"] >= len(metrics)  # a request a step
        assert end["env_episodes"] == sum(m.trajectories + m.failed_episodes for m in metrics)  # one each
        for expr, result in end["dashboard"].items():  # every query parses; driver-side ones have data
            driver_side = any(
                n.startswith(("turnopd_controller_", "turnopd_learner_")) for n in metric_names_in(expr)
            )
            if driver_side and "==" not in expr:  # the probe annotation filters on the last step's kind
                assert result, expr
