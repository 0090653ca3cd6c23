"""The resources the manifests and `ray up` configs request match the run config's [cluster]."""

import copy
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from deploy.checks.__main__ import RAY_UP_DIR, check_ray_up, run_config_of
from deploy.checks.kubernetes import REPO_ROOT
from deploy.checks.ray_configs import load_yaml
from deploy.checks.sizing import (
    POOLS,
    check_kuberay_sizing,
    check_onprem_sizing,
    check_ray_up_sizing,
    cluster_sizing,
    parse_ray_resources,
    run_config_text,
)
from services.settings.loader import load_settings

Resources = list[dict[str, Any]]
PAPER_CONFIG = REPO_ROOT / "deploy" / "config" / "paper_alfworld_cluster.toml"
RUN_CONFIGS = [PAPER_CONFIG, REPO_ROOT / "k8s" / "overlays" / "dev" / "turnopd.toml"]


def ray_cluster(resources: Resources) -> dict[str, Any]:
    return next(r for r in resources if r["kind"] == "RayCluster")


def test_gpu_cluster_pools_match_the_paper_config(rendered: dict[str, Resources]) -> None:
    sizing = cluster_sizing(PAPER_CONFIG.read_text())
    groups = {g["groupName"]: g for g in ray_cluster(rendered["gpu-cluster"])["spec"]["workerGroupSpecs"]}
    seen = {}
    for pool, group in groups.items():
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        seen[pool] = (
            group["replicas"],
            limits.get("nvidia.com/gpu", 0),
            parse_ray_resources(group["rayStartParams"]["resources"]),
        )
    assert seen == {
        pool: (size.workers, size.gpus_per_worker, {f"{pool}_pool": 1.0}) for pool, size in sizing.items()
    }
    assert seen["learner"] == (4, 1, {"learner_pool": 1.0})
    assert seen["rollout"][:2] == (8, 1)
    assert seen["env"][:2] == (4, 0)


def test_dev_overlay_uses_its_own_run_config(rendered: dict[str, Resources]) -> None:
    dev = rendered["dev"]
    assert run_config_text(dev) == (REPO_ROOT / "k8s" / "overlays" / "dev" / "turnopd.toml").read_text()
    assert check_kuberay_sizing("dev", dev) == []
    assert cluster_sizing(run_config_text(dev))["learner"].workers == 2


def _gpu_limit_path(index: int) -> str:
    return f"spec.workerGroupSpecs[{index}].template.spec.containers[0].resources.limits.nvidia.com/gpu"


def test_gpu_request_differing_from_config_fails(rendered: dict[str, Resources]) -> None:
    resources = copy.deepcopy(rendered["gpu-cluster"])
    learner = ray_cluster(resources)["spec"]["workerGroupSpecs"][2]
    learner["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 2
    problems = [str(p) for p in check_kuberay_sizing("gpu-cluster", resources)]
    assert problems == [
        f"gpu-cluster: RayCluster/turnopd: {_gpu_limit_path(2)}: 2 GPUs per pod, but the run config asks 1",
        "gpu-cluster: RayCluster/turnopd: spec.workerGroupSpecs[2].template.spec.containers[0].resources"
        ".requests.nvidia.com/gpu: GPU request 1 differs from the limit 2",
    ]


def test_config_asking_more_workers_than_the_group_has_fails(rendered: dict[str, Resources]) -> None:
    resources = copy.deepcopy(rendered["gpu-cluster"])
    config = next(r for r in resources if r["metadata"]["name"] == "turnopd-config")
    config["data"]["turnopd.toml"] = config["data"]["turnopd.toml"].replace(
        "rollout_workers = 8", "rollout_workers = 12"
    )
    problems = [str(p) for p in check_kuberay_sizing("gpu-cluster", resources)]
    assert problems == [
        "gpu-cluster: RayCluster/turnopd: spec.workerGroupSpecs[0].replicas: 8 pods, "
        "but [cluster] rollout_workers = 12"
    ]


def test_wrong_pool_resource_and_missing_group_fail(rendered: dict[str, Resources]) -> None:
    resources = copy.deepcopy(rendered["gpu-cluster-serve"])
    service = next(r for r in resources if r["kind"] == "RayService")
    groups = service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    groups[1]["rayStartParams"]["resources"] = '"{\\"rollout_pool\\": 1}"'
    del groups[3]
    problems = [str(p) for p in check_kuberay_sizing("serve", resources)]
    assert problems == [
        "serve: RayService/turnopd-serve: "
        "spec.rayClusterConfig.workerGroupSpecs[1].rayStartParams.resources: "
        "advertises {'rollout_pool': 1.0}, expected {'teacher_pool': 1}",
        "serve: RayService/turnopd-serve: spec.rayClusterConfig.workerGroupSpecs: no worker group 'env'",
    ]


def test_replicas_outside_min_max_fail(rendered: dict[str, Resources]) -> None:
    resources = copy.deepcopy(rendered["gpu-cluster"])
    ray_cluster(resources)["spec"]["workerGroupSpecs"][3]["maxReplicas"] = 2
    problems = [str(p) for p in check_kuberay_sizing("g", resources)]
    assert problems == [
        "g: RayCluster/turnopd: spec.workerGroupSpecs[3].maxReplicas: "
        "need minReplicas (0) <= replicas (4) <= maxReplicas (2)"
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"{\\"rollout_pool\\": 1}"', {"rollout_pool": 1.0}),
        ('{"env_pool": 2, "CPU": 4}', {"env_pool": 2.0, "CPU": 4.0}),
        ("{}", {}),
    ],
)
def test_parse_kuberay_resources(value: str, expected: dict[str, float]) -> None:
    assert parse_ray_resources(value) == expected


def test_cluster_section_keys_are_required() -> None:
    text = PAPER_CONFIG.read_text().replace("teacher_gpus_per_replica = 1\n", "")
    with pytest.raises(ValueError, match=r"cluster\.teacher_gpus_per_replica must be an integer"):
        cluster_sizing(text)
    assert set(cluster_sizing(PAPER_CONFIG.read_text())) == set(POOLS)


@pytest.mark.parametrize("path", RUN_CONFIGS, ids=lambda p: p.parent.name)
def test_run_configs_load_as_turnopd_settings(path: Path) -> None:
    # The whole file, [cluster] included, is one TurnOPD settings tree; the checks read the same numbers.
    values = tomllib.loads(path.read_text())
    settings = load_settings(path)
    assert settings.run.method == "turnopd"
    assert settings.optim.steps == values["optim"]["steps"]
    assert settings.cluster.pool_resources is True
    sizing = cluster_sizing(path.read_text())
    assert sizing["learner"].workers == settings.cluster.learner_workers
    assert sizing["rollout"].gpus_per_worker == settings.cluster.rollout_gpus_per_worker


def test_paper_cluster_config_agrees_with_configs_paper_alfworld() -> None:
    reference = REPO_ROOT / "configs" / "paper_alfworld.toml"
    if not reference.exists():
        pytest.skip("configs/paper_alfworld.toml is not in this tree yet")
    ours = tomllib.loads(PAPER_CONFIG.read_text())
    theirs = tomllib.loads(reference.read_text())
    for section, values in ours.items():
        for key, value in values.items():
            if section in theirs and key in theirs[section] and (section, key) != ("run", "run_dir"):
                assert theirs[section][key] == value, f"{section}.{key}"


@pytest.mark.parametrize("name", ["aws-gpu.yaml", "onprem.yaml"])
def test_ray_up_configs_deploy_the_paper_config_with_matching_sizes(name: str) -> None:
    path = RAY_UP_DIR / name
    config = load_yaml(path)
    assert run_config_of(config) == PAPER_CONFIG
    assert check_ray_up(path, config) == []


def test_ray_up_node_type_gpu_mismatch_fails() -> None:
    config = load_yaml(RAY_UP_DIR / "aws-gpu.yaml")
    config["available_node_types"]["teacher"]["resources"]["GPU"] = 2
    config["available_node_types"]["rollout"]["max_workers"] = 4
    sizing = cluster_sizing(PAPER_CONFIG.read_text())
    assert [str(p) for p in check_ray_up_sizing("aws", config, sizing)] == [
        "aws: ray-up/turnopd: available_node_types.rollout.max_workers: 4 < [cluster] rollout_workers = 8",
        "aws: ray-up/turnopd: available_node_types.teacher.resources.GPU: 2 GPUs per node, "
        "but the run config asks 1",
    ]


def test_onprem_pool_map_must_add_up() -> None:
    config = load_yaml(RAY_UP_DIR / "onprem.yaml")
    pool_map = json.loads((RAY_UP_DIR / "onprem-pools.json").read_text())
    pool_map["hosts"]["192.0.2.12"]["learner_pool"] = 3
    config["provider"]["worker_ips"] = config["provider"]["worker_ips"][:2]
    sizing = cluster_sizing(PAPER_CONFIG.read_text())
    assert [str(p) for p in check_onprem_sizing("op", config, pool_map, sizing)] == [
        "op: ray-up/turnopd-onprem: provider.worker_ips: ['192.0.2.11', '192.0.2.12'] differ from the "
        "pool map's ['192.0.2.11', '192.0.2.12', '192.0.2.13']",
        "op: ray-up/turnopd-onprem: hosts.*.learner_pool: 3 slots, but [cluster] learner_workers = 4",
        "op: ray-up/turnopd-onprem: hosts.192.0.2.12.GPU: 8 GPUs, but its pool slots need 7",
    ]
