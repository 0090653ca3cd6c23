"""Shared integration fixtures."""

import pytest
import ray


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole test session (2 CPUs, no dashboard, namespace `turnopd`).

    Tests that start Serve apps delete them (or shut Serve down) when done, so others can reuse it.
    """
    ray.init(num_cpus=2, include_dashboard=False, namespace="turnopd")
    yield
    ray.shutdown()
