from pathlib import Path

import pytest
from rollout_fixtures import zoo_cache_dir


@pytest.fixture(scope="session")
def zoo_cache() -> Path:
    """The default tiny zoo (seed 0), built once into a test-only corner of the cache and reused."""
    return zoo_cache_dir()
