"""The manifests give every Ray pod what the services insist on beyond the loopback: a Redis URL with
the password from the `turnopd-redis` Secret, and the service token from `turnopd-service-token`."""

from typing import Any

import pytest

from services.errors import ConfigError
from services.service_auth import check_redis_url


def ray_containers(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cluster = next(r for r in resources if r["kind"] in ("RayCluster", "RayService"))["spec"]
    spec = cluster.get("rayClusterConfig", cluster)
    templates = [spec["headGroupSpec"]["template"]] + [g["template"] for g in spec["workerGroupSpecs"]]
    return [t["spec"]["containers"][0] for t in templates]


@pytest.mark.parametrize("overlay", ["dev", "gpu-cluster", "gpu-cluster-serve"])
def test_every_ray_pod_has_a_password_redis_url_and_the_token(rendered, overlay):
    containers = ray_containers(rendered[overlay])
    assert len(containers) == 5
    for container in containers:
        env = {e["name"]: e for e in container["env"]}
        assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
            "name": "turnopd-redis",
            "key": "password",
        }
        url = env["REDIS_URL"]["value"].replace("$(REDIS_PASSWORD)", "from-the-secret")
        check_redis_url(url, allow_unauthenticated=False)  # the controller would accept it
        assert env["TURNOPD_SERVICE_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "turnopd-service-token"
    with pytest.raises(ConfigError):  # and would refuse it without the password
        check_redis_url(url.replace(":from-the-secret@", ""), allow_unauthenticated=False)
