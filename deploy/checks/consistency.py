"""Cross-references inside a render: the ConfigMaps, volumes and Secrets pods use exist (or are
the documented out-of-band Secrets), every Ray pod runs the image built by deploy/Dockerfile,
and the clusters' rayVersion is the Ray that image installs."""

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from deploy.checks.kubernetes import Resource, resource_id
from deploy.checks.problem import Problem

# Secrets an operator creates before applying a production overlay (docs/deploy.md): name -> keys.
EXTERNAL_SECRETS: dict[str, frozenset[str]] = {
    "turnopd-redis": frozenset({"password"}),
    "turnopd-service-token": frozenset({"token"}),
}
IMAGE_REPOSITORY = "turnopd/turnopd"


def pod_specs(resource: Resource) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, pod spec) of every pod template in a resource, core kinds and KubeRay kinds."""
    kind, spec = resource.get("kind"), resource.get("spec", {})
    if kind in ("StatefulSet", "Deployment", "Job", "DaemonSet"):
        yield "spec.template.spec", spec["template"]["spec"]
    elif kind == "RayJob" and "submitterPodTemplate" in spec:
        yield "spec.submitterPodTemplate.spec", spec["submitterPodTemplate"]["spec"]
    cluster, prefix = None, ""
    if kind == "RayCluster":
        cluster, prefix = spec, "spec"
    elif kind == "RayService":
        cluster, prefix = spec["rayClusterConfig"], "spec.rayClusterConfig"
    if cluster is not None:
        yield f"{prefix}.headGroupSpec.template.spec", cluster["headGroupSpec"]["template"]["spec"]
        for index, group in enumerate(cluster.get("workerGroupSpecs", [])):
            yield f"{prefix}.workerGroupSpecs[{index}].template.spec", group["template"]["spec"]


def _references(path: str, pod: Mapping[str, Any]) -> Iterator[tuple[str, str, str, str | None]]:
    """(path, kind, name, key) of every ConfigMap / Secret / PVC a pod spec refers to."""
    for index, volume in enumerate(pod.get("volumes", [])):
        vpath = f"{path}.volumes[{index}]"
        if "configMap" in volume:
            yield vpath, "ConfigMap", volume["configMap"]["name"], None
        if "secret" in volume:
            yield vpath, "Secret", volume["secret"]["secretName"], None
        if "persistentVolumeClaim" in volume:
            yield vpath, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"], None
    for group in ("initContainers", "containers"):
        for cindex, container in enumerate(pod.get(group, [])):
            for eindex, env in enumerate(container.get("env", [])):
                source = env.get("valueFrom", {})
                epath = f"{path}.{group}[{cindex}].env[{eindex}]"
                if "secretKeyRef" in source:
                    yield epath, "Secret", source["secretKeyRef"]["name"], source["secretKeyRef"]["key"]
                if "configMapKeyRef" in source:
                    ref = source["configMapKeyRef"]
                    yield epath, "ConfigMap", ref["name"], ref["key"]


def _monitor_secret_refs(resource: Resource) -> Iterator[tuple[str, str, str, str | None]]:
    for index, endpoint in enumerate(resource.get("spec", {}).get("podMetricsEndpoints", [])):
        credentials = endpoint.get("authorization", {}).get("credentials")
        if credentials:
            path = f"spec.podMetricsEndpoints[{index}].authorization.credentials"
            yield path, "Secret", credentials["name"], credentials["key"]


def check_references(where: str, resources: Sequence[Resource]) -> list[Problem]:
    """Referenced ConfigMaps and PVCs exist in the render; Secrets exist or are documented external."""
    present: dict[tuple[str, str], set[str]] = {}
    for resource in resources:
        data = {**resource.get("data", {}), **resource.get("stringData", {})}
        present[(resource["kind"], resource["metadata"]["name"])] = set(data)
    problems = []
    for resource in resources:
        refs = list(_monitor_secret_refs(resource))
        for path, pod in pod_specs(resource):
            refs += list(_references(path, pod))
        for path, kind, name, key in refs:
            keys = present.get((kind, name))
            if keys is None and kind == "Secret" and name in EXTERNAL_SECRETS:
                keys = set(EXTERNAL_SECRETS[name])  # created before applying (docs/deploy.md)
            if keys is None:
                problems.append(
                    Problem(where, resource_id(resource), path, f"{kind} '{name}' is not defined")
                )
            elif key is not None and kind != "PersistentVolumeClaim" and key not in keys:
                problems.append(
                    Problem(where, resource_id(resource), path, f"{kind} '{name}' has no key '{key}'")
                )
    return problems


def image_repository(image: str) -> str:
    """``registry/ns/name:tag`` -> ``ns/name`` (the last two path parts, no tag or digest)."""
    name = image.split("@")[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    return "/".join(name.split("/")[-2:])


def check_images(where: str, resources: Sequence[Resource]) -> list[Problem]:
    """Every container of a TurnOPD pod (not Redis) runs one and the same TurnOPD image."""
    images: dict[str, tuple[str, str]] = {}
    for resource in resources:
        for path, pod in pod_specs(resource):
            for index, container in enumerate(pod.get("containers", [])):
                if container["image"].split(":")[0].rsplit("/", 1)[-1] == "redis":
                    continue
                images[container["image"]] = (resource_id(resource), f"{path}.containers[{index}].image")
    problems = [
        Problem(where, rid, path, f"image {image!r} is not the TurnOPD image ({IMAGE_REPOSITORY})")
        for image, (rid, path) in images.items()
        if image_repository(image) != IMAGE_REPOSITORY
    ]
    if len(images) > 1:
        problems.append(Problem(where, "*", "image", f"Ray pods run different images: {sorted(images)}"))
    return problems


def dockerfile_ray_version(dockerfile: str) -> str:
    """The default of ``ARG RAY_VERSION=...`` in deploy/Dockerfile."""
    match = re.search(r"^ARG RAY_VERSION=(\S+)$", dockerfile, flags=re.MULTILINE)
    if match is None:
        raise ValueError("deploy/Dockerfile has no `ARG RAY_VERSION=<version>` line")
    return match.group(1)


def check_ray_version(where: str, resources: Sequence[Resource], ray_version: str) -> list[Problem]:
    """RayCluster / RayService rayVersion equals the Ray the image installs."""
    problems = []
    for resource in resources:
        for kind, prefix in (("RayCluster", "spec"), ("RayService", "spec.rayClusterConfig")):
            if resource.get("kind") != kind:
                continue
            spec = resource["spec"] if kind == "RayCluster" else resource["spec"]["rayClusterConfig"]
            if spec.get("rayVersion") != ray_version:
                problems.append(
                    Problem(
                        where,
                        resource_id(resource),
                        f"{prefix}.rayVersion",
                        f"{spec.get('rayVersion')!r}, but deploy/Dockerfile installs {ray_version}",
                    )
                )
    return problems
