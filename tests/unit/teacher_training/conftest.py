from pathlib import Path

import pytest
from expert_episodes import scripted_episode

from services.agent.chat_format import ChatFormat
from services.contracts.expert_data import ExpertEpisode
from services.models.loading import load_tokenizer


@pytest.fixture(scope="session")
def chat(zoo_cache: Path) -> ChatFormat:
    return ChatFormat(load_tokenizer("teacher", zoo_cache))


@pytest.fixture
def episode() -> ExpertEpisode:
    return scripted_episode()
