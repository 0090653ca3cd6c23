"""Cross-references in the renders, the image recipe, the dashboard, and the checks' CLI."""

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from deploy.checks import __main__ as checks_cli
from deploy.checks.consistency import (
    check_images,
    check_ray_version,
    check_references,
    dockerfile_ray_version,
    image_repository,
)
from deploy.checks.kubernetes import REPO_ROOT

Resources = list[dict[str, Any]]
DOCKERFILE = REPO_ROOT / "deploy" / "Dockerfile"
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "turnopd.json"


def by_name(resources: Resources, kind: str, name: str) -> dict[str, Any]:
    return next(r for r in resources if r["kind"] == kind and r["metadata"]["name"] == name)


def test_missing_config_map_and_secret_key_are_reported(rendered: dict[str, Resources]) -> None:
    resources = copy.deepcopy(rendered["dev"])
    resources.remove(by_name(resources, "ConfigMap", "turnopd-config"))
    secret = by_name(resources, "Secret", "turnopd-service-token")
    secret["data"] = {"tok": secret["data"]["token"]}
    problems = [str(p) for p in check_references("dev", resources)]
    assert (
        "dev: RayCluster/turnopd: spec.headGroupSpec.template.spec.volumes[0]: ConfigMap 'turnopd-config' "
        "is not defined" in problems
    )
    assert (
        "dev: PodMonitor/turnopd-teacher: spec.podMetricsEndpoints[0].authorization.credentials: "
        "Secret 'turnopd-service-token' has no key 'token'" in problems
    )
    assert len(problems) == 5 + 5 + 3  # 5 Ray pods lose the config; 5 pods + 3 monitors lose the token


def test_unknown_secret_is_reported(rendered: dict[str, Resources]) -> None:
    resources = copy.deepcopy(rendered["gpu-cluster"])
    redis = by_name(resources, "StatefulSet", "turnopd-redis")
    redis["spec"]["template"]["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"] = (
        "redis"
    )
    assert [str(p) for p in check_references("g", resources)] == [
        "g: StatefulSet/turnopd-redis: spec.template.spec.containers[0].env[0]: Secret 'redis' is not defined"
    ]


def test_every_ray_pod_runs_the_overlay_image(rendered: dict[str, Resources]) -> None:
    resources = copy.deepcopy(rendered["gpu-cluster"])
    job = by_name(resources, "RayJob", "turnopd-train")
    job["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.60.0"
    problems = [str(p) for p in check_images("g", resources)]
    assert problems[0] == (
        "g: RayJob/turnopd-train: spec.submitterPodTemplate.spec.containers[0].image: "
        "image 'rayproject/ray:2.60.0' is not the TurnOPD image (turnopd/turnopd)"
    )
    assert problems[1].startswith("g: *: image: Ray pods run different images")


@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("turnopd/turnopd:0.1.0", "turnopd/turnopd"),
        ("registry.example.com:5000/turnopd/turnopd:0.1.0", "turnopd/turnopd"),
        ("ghcr.io/acme/turnopd/turnopd@sha256:abc", "turnopd/turnopd"),
    ],
)
def test_image_repository(image: str, repository: str) -> None:
    assert image_repository(image) == repository


def test_ray_version_matches_the_image(rendered: dict[str, Resources]) -> None:
    version = dockerfile_ray_version(DOCKERFILE.read_text())
    assert version == "2.60.0"
    assert check_ray_version("g", rendered["gpu-cluster"], version) == []
    assert [str(p) for p in check_ray_version("g", rendered["gpu-cluster-serve"], "2.61.0")] == [
        "g: RayService/turnopd-serve: spec.rayClusterConfig.rayVersion: '2.60.0', "
        "but deploy/Dockerfile installs 2.61.0"
    ]


def test_dockerfile_builds_turnopd_gpu_on_cuda() -> None:
    text = DOCKERFILE.read_text()
    assert "ARG CUDA_IMAGE=nvidia/cuda:" in text
    assert "FROM ${CUDA_IMAGE}" in text
    assert 'pip install ".[gpu]" "ray[default,serve,train]==${RAY_VERSION}"' in text
    assert "wget" in text  # KubeRay's default probes call it


def test_dashboard_rows_and_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == [
        "Controller: rollout horizon and blend",
        "Learner: loss allocation across turns",
        "Throughput and health",
    ]
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    text = " ".join(exprs)
    for metric in (
        "turnopd_controller_h_eff",
        "turnopd_controller_h_cov",
        "turnopd_controller_h_hat",
        "turnopd_controller_h_roll",
        "turnopd_controller_alpha",
        "turnopd_learner_turn_loss_share",
        "turnopd_learner_deep_loss_budget",
        "turnopd_rollout_tokens_per_second",
        "turnopd_teacher_scored_positions_total",
        "turnopd_env_step_latency_seconds_bucket",
        "turnopd_pool_busy_ratio",
        "turnopd_pool_overlap_ratio",
        "turnopd_step_weights_lag_bucket",
        "up{",
    ):
        assert metric in text, metric
    probes = [a for a in dashboard["annotations"]["list"] if a["name"] == "Probe steps"]
    assert probes[0]["expr"].startswith("turnopd_controller_probe")
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_dashboard_config_map_is_sidecar_loadable(rendered: dict[str, Resources]) -> None:
    config_map = by_name(rendered["gpu-cluster"], "ConfigMap", "turnopd-grafana-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["turnopd.json"]) == json.loads(DASHBOARD.read_text())


def test_cli_reports_ok(capsys: pytest.CaptureFixture[str]) -> None:
    assert checks_cli.main() == 0
    assert capsys.readouterr().out == "ok: 6 overlays/configs valid\n"


def test_cli_reports_problems_with_paths(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "aws-gpu.yaml"
    text = (checks_cli.RAY_UP_DIR / "aws-gpu.yaml").read_text()
    broken.write_text(text.replace("max_workers: 36", "max_workers: many"))
    monkeypatch.setattr(checks_cli, "overlay_dirs", lambda: [])
    monkeypatch.setattr(checks_cli, "ray_up_configs", lambda: [broken])
    assert checks_cli.main() == 1
    out = capsys.readouterr()
    assert f"{broken}: ray-up/turnopd: max_workers: 'many' is not of type 'integer'" in out.out
    assert "problem(s) in 2 overlays/configs" in out.err
