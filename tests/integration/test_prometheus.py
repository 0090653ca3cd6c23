"""A real Prometheus scrapes a real short training through the repo's scrape config.

Prometheus (Debian's package; `scripts/setup.sh` installs it) runs on loopback with
`deploy/prometheus/prometheus.yml`, its targets moved to this test's ports and a 1 s interval.
After every step the test waits until Prometheus has scraped that step, then checks the controller's
values there against what the run logs (metrics.jsonl, controller.jsonl); at the end every query of
the Grafana dashboard must be valid PromQL and the teacher's and env gateway's series must be there.
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
from rollout_fixtures import zoo_cache_dir

from services.cache_dir import resolve_cache_dir
from services.contracts.controller import StepDecision
from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import StepMetrics
from services.loopback import free_loopback_port
from services.orchestrator.pipeline import train
from services.run_dir import RunDir
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
SCRAPE_WAIT_S = 30.0


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


def run_config(tmp_path: Path, driver: int, gateway: int) -> Path:
    """configs/smoke.toml on the test caches, with this test's ports; every turn counts as reliable."""
    games = resolve_cache_dir() / "test-fixtures" / "envs"
    replacements = {
        "[env_gateway]\nworkers = 1\nport = 0\n": f'[env_gateway]\ncache_dir = "{games}"\nworkers = 1\nport = {gateway}\n',
        "[metrics]\nport = 0": f"[metrics]\nport = {driver}",
        "[models]\n": f'[models]\ncache_dir = "{zoo_cache_dir()}"\n',
        'run_dir = "runs/smoke"': f'run_dir = "{tmp_path / "run"}"',
    }
    text = (REPO / "configs" / "smoke.toml").read_text()
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    text += "\n[diagnostics]\nmin_survivors = 1\nmin_survivor_frac = 0.0\n"
    path = tmp_path / "prometheus-run.toml"
    path.write_text(text)
    return path


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


@pytest.fixture
def serve_on_free_port(ray_session):
    from ray import serve

    serve.shutdown()  # a Serve left by an earlier test would keep its own HTTP port
    port = free_loopback_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    yield port
    serve.shutdown()


@pytest.mark.skipif(
    shutil.which("prometheus") is None,
    reason="no prometheus binary: run scripts/setup.sh --with-prometheus as root",
)
def test_prometheus_sees_the_controller_horizon_of_a_real_run(serve_on_free_port, tmp_path):
    driver, gateway = free_loopback_port(), free_loopback_port()
    prometheus_yml = tmp_path / "prometheus.yml"
    prometheus_yml.write_text(yaml.safe_dump(scrape_config(driver, serve_on_free_port, gateway)))
    prometheus = Prometheus(prometheus_yml, tmp_path / "tsdb", tmp_path / "prometheus.log")
    config = run_config(tmp_path, driver, gateway)
    settings = load_settings(config)
    assert (settings.metrics.port, settings.env_gateway.port) == (driver, gateway)
    run = RunDir(settings.run.run_dir)
    run.create(settings.model_dump_json())
    seen: dict[int, dict[str, float | None]] = {}
    names = ("step", "h_hat", "h_bar", "h_roll", "h_cov", "h_eff", "h_ctrl", "alpha", "probe", "probes_total")

    def on_step(m: StepMetrics) -> None:
        prometheus.wait_for("turnopd_controller_step", m.step)  # Prometheus has scraped this step
        seen[m.step] = {name: prometheus.value(f"turnopd_controller_{name}") for name in names}
        seen[m.step]["learner_loss"] = prometheus.value("turnopd_learner_loss")
        seen[m.step]["rollout_weights_version"] = prometheus.value("turnopd_rollout_weights_version")
        if m.step == settings.optim.steps:  # every service is still up: look at all of them
            end["up"] = {r["metric"]["job"]: r["value"][1] for r in prometheus.query("up")}
            end["teacher_ok"] = prometheus.value('sum(turnopd_teacher_requests_total{outcome="ok"})')
            end["env_episodes"] = prometheus.value("sum(turnopd_env_episodes_created_total)")
            end["dashboard"] = {expr: prometheus.query(expr) for expr in dashboard_queries()}

    end: dict[str, Any] = {}
    try:
        assert train(settings, run, on_step, lambda record: None) == 3
    finally:
        prometheus.stop()

    metrics = read_jsonl(run.path("metrics.jsonl"), StepMetrics)
    decisions = read_jsonl(run.path("controller.jsonl"), StepDecision)
    assert sorted(seen) == [m.step for m in metrics] == [d.step for d in decisions] == [1, 2, 3]
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
        assert got["rollout_weights_version"] == m.weights_version - 1
    # the horizon moved where the controller moved it: probes roll out to H_max, routine steps to H_hat
    assert [seen[k]["h_roll"] for k in (1, 2, 3)] == [float(m.h_roll) for m in metrics]
    assert end["up"] == {"turnopd-driver": "1", "turnopd-teacher": "1", "turnopd-env-gateway": "1"}
    assert end["teacher_ok"] is not None and end["teacher_ok"] >= 3  # a scoring request per step at least
    assert end["env_episodes"] == sum(m.trajectories + m.failed_episodes for m in metrics)  # one per episode
    for expr, result in end["dashboard"].items():  # every dashboard query parses; driver-side ones have data
        driver_side = any(
            n.startswith(("turnopd_controller_", "turnopd_learner_")) for n in metric_names_in(expr)
        )
        if driver_side and "==" not in expr:  # the probe annotation filters: step 3 is a routine step
            assert result, expr
