"""Ray in one place: starting or joining it (``turnopd train``, ``turnopd eval``, the standalone
teacher), joining a live run's cluster (``turnopd status``/``restart``/``scale``), placing the actors
that belong to no pool, and waiting for a killed named actor's name to come free. The names
themselves: ``services/ray_names.py``."""

import logging
import math
import os
import socket
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from services.errors import NotFoundError, TurnOPDError
from services.ray_names import NAMESPACE


def ensure_ray(cpus_needed: float) -> bool:
    """Join ``RAY_ADDRESS``'s cluster, or start a local one with at least ``cpus_needed`` logical
    CPUs (and no fewer than the machine's cores), in the run's namespace. Returns whether this call
    started or joined it (False: Ray was already up in this process; the caller must not shut it down)."""
    if ray.is_initialized():
        return False
    local = "RAY_ADDRESS" not in os.environ
    cpus = max(os.cpu_count() or 1, math.ceil(cpus_needed)) if local else None
    ray.init(namespace=NAMESPACE, include_dashboard=False, log_to_driver=False, num_cpus=cpus)
    return True


def _check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """Fail fast on a ``host:port`` nothing listens on (Ray itself would retry for minutes)."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise NotFoundError(
            f"no Ray cluster answers at {address} (RAY_ADDRESS): {exc.strerror or exc}"
        ) from None


def join_cluster() -> None:
    """Connect to ``RAY_ADDRESS``'s cluster, else the one running on this machine (namespace `turnopd`)."""
    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS", "auto")
    _check_reachable(address)
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level=logging.ERROR,
            configure_logging=False,
        )
    except ConnectionError as exc:
        raise NotFoundError(
            f"no Ray cluster at {address!r} (is `turnopd train` running? set RAY_ADDRESS): "
            f"{' '.join(str(exc).split())[:200]}"
        ) from None


def wait_name_free(name: str, namespace: str, timeout_s: float) -> bool:
    """Wait until no live actor holds ``name``; False if one still does after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ray.get_actor(name, namespace=namespace)
        except ValueError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def free_name(name: str, what: str, timeout_s: float = 60.0) -> None:
    """Wait until no actor of namespace `turnopd` holds ``name`` (a killed actor's name is freed
    asynchronously); TurnOPDError naming ``what`` if one still does after ``timeout_s``."""
    if not wait_name_free(name, NAMESPACE, timeout_s):
        raise TurnOPDError(f"{what}'s name {name!r} is still taken after {timeout_s:.0f} s")


def on_driver_node() -> dict[str, Any]:
    """Ray options that keep an actor of no pool (the controller, `run-control`, the learner's
    queues) on the node of the driver that creates it: the run cannot outlive its driver anyway,
    while a pool's node may go away (a lost node, a scale-down) and take such an actor with it."""
    node = ray.get_runtime_context().get_node_id()
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node, soft=False)}
