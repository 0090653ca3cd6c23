import os
from pathlib import Path

import pytest
from rollout_fixtures import zoo_cache_dir


@pytest.fixture(scope="session")
def zoo_cache() -> Path:
    """The default tiny zoo (seed 0), built once into a test-only corner of the cache and reused."""
    return zoo_cache_dir()


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths every os.fsync call synced, in order (then the real fsync)."""
    calls: list[str] = []
    real = os.fsync

    def record(fd: int) -> None:
        calls.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", record)
    return calls
