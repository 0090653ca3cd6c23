"""Shared fixtures for integration tests: one local Ray cluster per test session."""

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray cluster (2 CPUs, namespace `turnopd`), started once and shut down at the end."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, namespace="turnopd", log_to_driver=False)
    yield ray
    ray.shutdown()
