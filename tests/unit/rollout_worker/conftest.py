"""The compiled decode kernels, built once per test session into an empty cache root."""

import pytest

from services.rollout_worker.engines import native_kernels


@pytest.fixture(scope="session")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> native_kernels.DecodeKernels:
    """Built afresh: this machine has a C compiler, so they must build (under
    ``$TURNOPD_NATIVE_SANITIZE`` with the sanitizers asked for)."""
    return native_kernels.load_kernels(tmp_path_factory.mktemp("kernel-cache"))
