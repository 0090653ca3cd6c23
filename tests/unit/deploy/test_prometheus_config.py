"""Scrape configs: the local one points at the settings tree's default ports on loopback; on the
cluster the driver's /metrics is declared, admitted by the network policy and scraped with the token."""

import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.ray_names import TEACHER_APP as APP_NAME
from services.service_auth import is_loopback
from services.settings.env_gateway import EnvGatewaySettings
from services.settings.metrics import MetricsSettings
from services.settings.teacher import TeacherSettings

REPO = Path(__file__).resolve().parents[3]
LOCAL = REPO / "deploy" / "prometheus" / "prometheus.yml"
Resources = list[dict[str, Any]]


def jobs() -> dict[str, dict[str, Any]]:
    return {job["job_name"]: job for job in yaml.safe_load(LOCAL.read_text())["scrape_configs"]}


def test_local_jobs_scrape_the_default_ports_on_loopback():
    targets = {
        name: (job["static_configs"][0]["targets"], job.get("metrics_path", "/metrics"))
        for name, job in jobs().items()
    }
    assert targets == {
        "turnopd-driver": ([f"127.0.0.1:{MetricsSettings().port}"], "/metrics"),
        "turnopd-teacher": ([f"127.0.0.1:{TeacherSettings().port}"], f"/{APP_NAME}/metrics"),
        "turnopd-env-gateway": ([f"127.0.0.1:{EnvGatewaySettings().port}"], "/metrics"),
    }
    assert all(
        is_loopback(h) for h in (MetricsSettings().host, TeacherSettings().host, EnvGatewaySettings().host)
    )


@pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool not installed (scripts/setup.sh --with-prometheus installs it)",
)
def test_promtool_accepts_the_local_config():
    result = subprocess.run(["promtool", "check", "config", str(LOCAL)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def by(resources: Resources, kind: str, name: str) -> dict[str, Any]:
    return next(r for r in resources if r["kind"] == kind and r["metadata"]["name"] == name)


@pytest.mark.parametrize(
    ("overlay", "config"),
    [
        ("gpu-cluster", REPO / "deploy" / "config" / "paper_alfworld_cluster.toml"),
        ("dev", REPO / "k8s" / "overlays" / "dev" / "turnopd.toml"),
    ],
)
def test_cluster_driver_metrics_are_scraped_with_the_token(rendered, overlay, config):
    resources = rendered[overlay]
    metrics = MetricsSettings.model_validate(tomllib.loads(config.read_text())["metrics"])
    assert not is_loopback(metrics.host)  # reachable from Prometheus, hence behind the token
    monitor = by(resources, "PodMonitor", "turnopd-driver")["spec"]
    endpoint = monitor["podMetricsEndpoints"][0]
    assert endpoint["authorization"]["credentials"] == {"name": "turnopd-service-token", "key": "token"}
    head = by(resources, "RayCluster", "turnopd")["spec"]["headGroupSpec"]["template"]
    assert monitor["selector"]["matchLabels"].items() <= head["metadata"]["labels"].items()
    container = head["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports[endpoint["port"]] == metrics.port
    env = {e["name"]: e for e in container["env"]}
    assert env["TURNOPD_SERVICE_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "turnopd-service-token"
    policy = by(resources, "NetworkPolicy", "turnopd-ray")["spec"]["ingress"]
    from_prometheus = next(r for r in policy if "prometheus" in str(r["from"]))
    assert {"protocol": "TCP", "port": metrics.port} in from_prometheus["ports"]


def test_every_turnopd_pod_monitor_sends_the_token(rendered):
    monitors = [r for r in rendered["gpu-cluster"] if r["kind"] == "PodMonitor"]
    turnopd = [m for m in monitors if m["metadata"]["name"] != "turnopd-ray"]  # Ray's own port has no token
    assert {m["metadata"]["name"] for m in turnopd} == {
        "turnopd-driver",
        "turnopd-teacher",
        "turnopd-env-gateway",
    }
    for m in turnopd:
        assert m["spec"]["podMetricsEndpoints"][0]["authorization"]["type"] == "Bearer"
