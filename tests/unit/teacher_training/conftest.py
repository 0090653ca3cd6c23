from pathlib import Path

import pytest
from expert_episodes import scripted_episode

from services.agent.chat_format import ChatFormat
from services.cache_dir import resolve_cache_dir
from services.contracts.expert_data import ExpertEpisode
from services.errors import ConflictError
from services.models.build import build_zoo
from services.models.loading import load_tokenizer


@pytest.fixture(scope="session")
def zoo_cache() -> Path:
    """The default tiny zoo (seed 0), built once into a test-only corner of the cache and reused."""
    cache = resolve_cache_dir() / "test-zoo"
    try:
        build_zoo(cache_dir=cache, seed=0)
    except ConflictError:  # built by an older version of the zoo code: this cache is the tests' own
        build_zoo(cache_dir=cache, seed=0, force=True)
    return cache


@pytest.fixture(scope="session")
def chat(zoo_cache: Path) -> ChatFormat:
    return ChatFormat(load_tokenizer("teacher", zoo_cache))


@pytest.fixture
def episode() -> ExpertEpisode:
    return scripted_episode()
