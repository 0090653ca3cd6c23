"""Ray in one place: joining or starting it (``turnopd train``, ``turnopd eval``), placing the actors
that belong to no pool, and waiting for a killed named actor's name to come free. The names
themselves: ``services/ray_names.py``."""

import math
import os
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

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


def on_driver_node() -> dict[str, Any]:
    """Ray options that keep an actor of no pool (the controller, `run-control`, the learner's
    queues) on the node of the driver that creates it: the run cannot outlive its driver anyway,
    while a pool's node may go away (a lost node, a scale-down) and take such an actor with it."""
    node = ray.get_runtime_context().get_node_id()
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node, soft=False)}
