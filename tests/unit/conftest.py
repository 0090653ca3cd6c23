from pathlib import Path

import pytest

from services.cache_dir import resolve_cache_dir
from services.errors import ConflictError
from services.models.build import build_zoo


@pytest.fixture(scope="session")
def zoo_cache() -> Path:
    """The default tiny zoo (seed 0), built once into a test-only corner of the cache and reused."""
    cache = resolve_cache_dir() / "test-zoo"
    try:
        build_zoo(cache_dir=cache, seed=0)
    except ConflictError:  # built by an older version of the zoo code: this cache is the tests' own
        build_zoo(cache_dir=cache, seed=0, force=True)
    return cache
