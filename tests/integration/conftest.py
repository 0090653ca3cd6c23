"""Shared fixtures for integration tests: one local Ray cluster per test session (per xdist worker)."""

import os

import pytest

from services.loopback import free_loopback_port

_SERVE_PORT: list[int] = []  # the session's Serve HTTP port, once started
SERVE_STARTS = 3


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray cluster (2 CPUs, namespace `turnopd`), started once and shut down at the end,
    with Serve's HTTP proxy on a free loopback port (``serve_port``), never on Serve's default 8000.

    ``scripts/test.sh`` runs pytest with two xdist workers, each with a cluster of its own: its Ray
    files under a temporary directory of the worker's own (``RAY_TMPDIR``, which the CLI processes a
    test starts inherit, so a `turnopd` command without ``RAY_ADDRESS`` joins this worker's cluster),
    and its proxy on a port of its own (a run's ``serve.run`` that found no Serve would start one on
    8000 in both clusters)."""
    import ray
    from ray import serve

    if not ray.is_initialized():
        if (worker := os.environ.get("PYTEST_XDIST_WORKER")) is not None:
            tmp = f"/tmp/rt-{worker}"  # short: Ray's socket paths have a length limit
            os.makedirs(tmp, exist_ok=True)
            os.environ["RAY_TMPDIR"] = tmp
        ray.init(num_cpus=2, include_dashboard=False, namespace="turnopd", log_to_driver=False)
    for attempt in range(1, SERVE_STARTS + 1):
        port = free_loopback_port()
        serve.shutdown()
        try:
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            break
        except ray.exceptions.RayError as exc:
            # under load, Serve's controller gave its proxy up before the proxy was ready (or the
            # picked port was taken meanwhile): Ray's start-up, not ours; a new port and a retry
            if attempt == SERVE_STARTS:
                raise
            print(f"Serve's start {attempt} of {SERVE_STARTS} failed ({type(exc).__name__}); again")
    _SERVE_PORT[:] = [port]
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def serve_port(ray_session) -> int:
    """The HTTP port of the session's Serve proxy on 127.0.0.1 (apps deployed with ``serve.run``
    answer there under their route prefix); tests deploy and delete apps, never restart Serve."""
    return _SERVE_PORT[0]
