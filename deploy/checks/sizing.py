"""Compare what the deployment requests with what the run config's [cluster] section asks for:
per pool, the number of pods / nodes, GPUs on each, and the pool resource that pins its actors."""

import json
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deploy.checks.kubernetes import Resource, resource_id
from deploy.checks.problem import Problem

# pool -> ([cluster] key of its worker count, key of its GPUs per worker; None: CPU-only pool)
POOLS: dict[str, tuple[str, str | None]] = {
    "rollout": ("rollout_workers", "rollout_gpus_per_worker"),
    "teacher": ("teacher_replicas", "teacher_gpus_per_replica"),
    "learner": ("learner_workers", "learner_gpus_per_worker"),
    "env": ("env_replicas", None),
}
GPU = "nvidia.com/gpu"
CONFIG_MAP = "turnopd-config"
CONFIG_KEY = "turnopd.toml"


@dataclass(frozen=True)
class PoolSize:
    """What the run config asks of one pool."""

    workers: int
    gpus_per_worker: int
    workers_key: str


def pool_resource(pool: str) -> str:
    """The custom Ray resource that pins a pool's actors to its own nodes."""
    return f"{pool}_pool"


def cluster_sizing(toml_text: str) -> dict[str, PoolSize]:
    """The per-pool sizing in a run config's [cluster] section (every key required)."""
    cluster = tomllib.loads(toml_text).get("cluster")
    if not isinstance(cluster, dict):
        raise ValueError("run config has no [cluster] section")
    sizing = {}
    for pool, (workers_key, gpus_key) in POOLS.items():
        for key in (workers_key, gpus_key):
            if key is not None and not isinstance(cluster.get(key), int):
                raise ValueError(f"run config: cluster.{key} must be an integer, got {cluster.get(key)!r}")
        gpus = cluster[gpus_key] if gpus_key else 0
        sizing[pool] = PoolSize(cluster[workers_key], gpus, workers_key)
    return sizing


def parse_ray_resources(value: str) -> dict[str, float]:
    """KubeRay's ``rayStartParams.resources``: JSON inside shell quotes, ``'"{\\"x_pool\\": 1}"'``."""
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].replace('\\"', '"')
    parsed = json.loads(text)
    if not isinstance(parsed, dict):
        raise ValueError(f"resources is not a JSON object: {value!r}")
    return {str(k): float(v) for k, v in parsed.items()}


def run_config_text(resources: Sequence[Resource]) -> str:
    """The run config TOML held by the rendered ConfigMap ``turnopd-config``."""
    for resource in resources:
        if resource.get("kind") == "ConfigMap" and resource["metadata"]["name"] == CONFIG_MAP:
            return str(resource["data"][CONFIG_KEY])
    raise ValueError(f"no ConfigMap {CONFIG_MAP} with key {CONFIG_KEY} in the render")


def ray_cluster_specs(resources: Sequence[Resource]) -> Iterator[tuple[Resource, str, Mapping[str, Any]]]:
    """Each Ray cluster spec in a render: a RayCluster's spec, a RayService's rayClusterConfig."""
    for resource in resources:
        if resource.get("kind") == "RayCluster":
            yield resource, "spec", resource["spec"]
        elif resource.get("kind") == "RayService":
            yield resource, "spec.rayClusterConfig", resource["spec"]["rayClusterConfig"]


def _pools_advertised(resources: Mapping[str, float]) -> dict[str, float]:
    return {name: count for name, count in resources.items() if name.endswith("_pool")}


def _check_group(
    where: str, rid: str, path: str, group: Mapping[str, Any], pool: str, size: PoolSize
) -> list[Problem]:
    problems = []
    replicas, low, high = group.get("replicas"), group.get("minReplicas", 0), group.get("maxReplicas")
    if replicas != size.workers:
        problems.append(
            Problem(
                where,
                rid,
                f"{path}.replicas",
                f"{replicas} pods, but [cluster] {size.workers_key} = {size.workers}",
            )
        )
    if not (isinstance(replicas, int) and isinstance(high, int) and low <= replicas <= high):
        problems.append(
            Problem(
                where,
                rid,
                f"{path}.maxReplicas",
                f"need minReplicas ({low}) <= replicas ({replicas}) <= maxReplicas ({high})",
            )
        )
    params = group.get("rayStartParams", {})
    advertised = _pools_advertised(parse_ray_resources(params.get("resources", "{}")))
    if advertised != {pool_resource(pool): 1}:
        problems.append(
            Problem(
                where,
                rid,
                f"{path}.rayStartParams.resources",
                f"advertises {advertised}, expected {{'{pool_resource(pool)}': 1}}",
            )
        )
    container = group["template"]["spec"]["containers"][0]  # KubeRay runs Ray in the first container
    limits = container.get("resources", {}).get("limits", {})
    requests = container.get("resources", {}).get("requests", {})
    gpus = int(limits.get(GPU, 0))
    gpu_path = f"{path}.template.spec.containers[0].resources.limits.{GPU}"
    if gpus != size.gpus_per_worker:
        problems.append(
            Problem(
                where, rid, gpu_path, f"{gpus} GPUs per pod, but the run config asks {size.gpus_per_worker}"
            )
        )
    if GPU in requests and int(requests[GPU]) != gpus:
        problems.append(
            Problem(
                where,
                rid,
                gpu_path.replace(".limits.", ".requests."),
                f"GPU request {requests[GPU]} differs from the limit {gpus}",
            )
        )
    if "num-gpus" in params and int(params["num-gpus"]) != gpus:
        problems.append(
            Problem(
                where,
                rid,
                f"{path}.rayStartParams.num-gpus",
                f"num-gpus {params['num-gpus']} differs from the container's {gpus} GPUs",
            )
        )
    return problems


def check_kuberay_sizing(where: str, resources: Sequence[Resource]) -> list[Problem]:
    """Every Ray cluster in a render has one worker group per pool, sized as its ConfigMap asks."""
    sizing = cluster_sizing(run_config_text(resources))
    problems = []
    for resource, prefix, spec in ray_cluster_specs(resources):
        rid = resource_id(resource)
        head_params = spec["headGroupSpec"].get("rayStartParams", {})
        if _pools_advertised(parse_ray_resources(head_params.get("resources", "{}"))):
            problems.append(
                Problem(
                    where,
                    rid,
                    f"{prefix}.headGroupSpec.rayStartParams.resources",
                    "the head must not advertise a pool resource",
                )
            )
        groups = spec.get("workerGroupSpecs", [])
        names = [group.get("groupName") for group in groups]
        for index, name in enumerate(names):
            if name not in POOLS:
                problems.append(
                    Problem(
                        where,
                        rid,
                        f"{prefix}.workerGroupSpecs[{index}].groupName",
                        f"'{name}' is not a pool ({', '.join(POOLS)})",
                    )
                )
        for pool, size in sizing.items():
            if pool not in names:
                problems.append(
                    Problem(where, rid, f"{prefix}.workerGroupSpecs", f"no worker group '{pool}'")
                )
                continue
            index = names.index(pool)
            path = f"{prefix}.workerGroupSpecs[{index}]"
            problems += _check_group(where, rid, path, groups[index], pool, size)
    return problems


def check_ray_up_sizing(where: str, config: Mapping[str, Any], sizing: dict[str, PoolSize]) -> list[Problem]:
    """A `ray up` config with node types: one type per pool, its GPUs, its room for the workers."""
    rid = f"ray-up/{config.get('cluster_name', '?')}"
    node_types: Mapping[str, Any] = config.get("available_node_types", {})
    problems = []
    head = node_types.get(str(config.get("head_node_type")), {})
    if _pools_advertised(head.get("resources", {})):
        problems.append(
            Problem(
                where,
                rid,
                f"available_node_types.{config.get('head_node_type')}.resources",
                "the head must not advertise a pool resource",
            )
        )
    for pool, size in sizing.items():
        owners = [name for name, nt in node_types.items() if pool_resource(pool) in nt.get("resources", {})]
        if len(owners) != 1:
            problems.append(
                Problem(
                    where,
                    rid,
                    "available_node_types",
                    f"expected one node type with {pool_resource(pool)}, found {owners}",
                )
            )
            continue
        node = node_types[owners[0]]
        path = f"available_node_types.{owners[0]}"
        if node["resources"][pool_resource(pool)] != 1:
            problems.append(
                Problem(where, rid, f"{path}.resources.{pool_resource(pool)}", "must be 1 per node")
            )
        if node["resources"].get("GPU", 0) != size.gpus_per_worker:
            problems.append(
                Problem(
                    where,
                    rid,
                    f"{path}.resources.GPU",
                    f"{node['resources'].get('GPU', 0)} GPUs per node, but the run config "
                    f"asks {size.gpus_per_worker}",
                )
            )
        if node.get("max_workers", 0) < size.workers:
            problems.append(
                Problem(
                    where,
                    rid,
                    f"{path}.max_workers",
                    f"{node.get('max_workers', 0)} < [cluster] {size.workers_key} = {size.workers}",
                )
            )
    total = sum(size.workers for size in sizing.values())
    if config.get("max_workers", 0) < total:
        problems.append(
            Problem(where, rid, "max_workers", f"{config.get('max_workers')} < {total} pool workers")
        )
    return problems


def check_onprem_sizing(
    where: str, config: Mapping[str, Any], pool_map: Mapping[str, Any], sizing: dict[str, PoolSize]
) -> list[Problem]:
    """`provider: local`: the pool map covers exactly the worker hosts, and adds up to [cluster]."""
    rid = f"ray-up/{config.get('cluster_name', '?')}"
    hosts: Mapping[str, Mapping[str, int]] = pool_map["hosts"]
    problems = []
    if sorted(config["provider"]["worker_ips"]) != sorted(hosts):
        problems.append(
            Problem(
                where,
                rid,
                "provider.worker_ips",
                f"{config['provider']['worker_ips']} differ from the pool map's {sorted(hosts)}",
            )
        )
    for pool, size in sizing.items():
        slots = sum(entry.get(pool_resource(pool), 0) for entry in hosts.values())
        if slots != size.workers:
            problems.append(
                Problem(
                    where,
                    rid,
                    f"hosts.*.{pool_resource(pool)}",
                    f"{slots} slots, but [cluster] {size.workers_key} = {size.workers}",
                )
            )
    for address, entry in hosts.items():
        needed = sum(
            entry.get(pool_resource(pool), 0) * size.gpus_per_worker for pool, size in sizing.items()
        )
        if entry.get("GPU", 0) != needed:
            problems.append(
                Problem(
                    where,
                    rid,
                    f"hosts.{address}.GPU",
                    f"{entry.get('GPU', 0)} GPUs, but its pool slots need {needed}",
                )
            )
    return problems
