"""The search env for real: the gateway (`turnopd serve env-gateway`) over HTTP with the expert,
the remote retriever against the project's retrieval server (`turnopd serve retrieval`) as a
separate process, including a slow server (timeout) and a failing one (HTTP 503)."""

import asyncio
import time
from pathlib import Path

import pytest

from services.contracts.env_gateway import EpisodeCreate
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.episode_errors import EngineError
from services.env_gateway.local_server import LocalGateway
from services.envs.search.bm25_index import Bm25Retriever
from services.envs.search.dataset import load_dataset
from services.envs.search.remote import RemoteRetriever
from services.envs.search.retrieval import RetrievalError
from services.retrieval_server.local_server import LocalRetrievalServer
from services.settings import load_settings
from services.teacher_training.collection import play_expert

pytestmark = pytest.mark.integration
SOURCES = ("single_hop", "two_hop", "three_hop")


def search_config(directory: Path, cache_dir: Path, search: str = "") -> Path:
    """A config whose gateway and retrieval server share the tests' generated encyclopedia."""
    config = directory / "search.toml"
    config.write_text(
        f'[env_gateway]\ncache_dir = "{cache_dir}"\nworkers = 1\n[env_gateway.search]\n{search}\n'
    )
    return config


@pytest.fixture(scope="module")
def cache_dir(test_cache_dir: Path) -> Path:
    return test_cache_dir / "envs"


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    return search_config(tmp_path_factory.mktemp("search"), cache_dir)


async def expert_rewards(url: str, split: str, per_source: int) -> dict[str, list[float]]:
    """The expert's reward on ``per_source`` questions of each data source, played over HTTP."""
    async with EnvGatewayClient(url, timeout_s=60.0) as client:

        async def one(source: str, seed: int) -> tuple[str, float]:
            # Without a task type, seed 3 * i + k is question i of the k-th data source.
            episode = await play_expert(client, "search", split, seed, max_turns=50)  # type: ignore[arg-type]
            return source, 0.0 if episode is None else episode.turns[-1].result.reward

        games = [(source, 3 * i + SOURCES.index(source)) for source in SOURCES for i in range(per_source)]
        results = await asyncio.gather(*(one(s, seed) for s, seed in games))
    rewards: dict[str, list[float]] = {s: [] for s in SOURCES}
    for source, reward in results:
        rewards[source].append(reward)
    return rewards


def test_gateway_lists_search_and_the_expert_wins_held_out_questions_over_http(config: Path):
    with LocalGateway(config, workers=1) as gateway:

        async def catalog():  # type: ignore[no-untyped-def]
            async with EnvGatewayClient(gateway.url) as client:
                return await client.envs()

        info = next(e for e in asyncio.run(catalog()).envs if e.name == "search")
        assert info.task_types == list(SOURCES) and info.games_per_split["valid_unseen"] > 500
        rewards = asyncio.run(expert_rewards(gateway.url, "valid_unseen", per_source=20))
    every = [r for rs in rewards.values() for r in rs]
    assert len(every) == 60 and sum(every) / len(every) >= 0.95
    assert all(sum(rs) / len(rs) >= 0.95 for rs in rewards.values())


def test_remote_retriever_matches_the_embedded_index_through_the_server(config: Path, cache_dir: Path):
    settings = load_settings(config).env_gateway.search
    dataset = load_dataset(settings, cache_dir)
    names = sorted({q.chain[-1] for pool in dataset.questions.values() for q in pool})[:50]
    local = Bm25Retriever(dataset.documents).retrieve(names, 3)
    with LocalRetrievalServer(config) as server:
        remote = RemoteRetriever(server.url, timeout_s=10.0)
        answered = remote.retrieve(names, 3)
        remote.close()
    assert [[(p.id, p.title, p.text) for p in hits] for hits in answered] == [
        [(p.id, p.title, p.text) for p in hits] for hits in local
    ]
    scores = [p.score for hits in answered for p in hits]
    assert scores == pytest.approx([p.score for hits in local for p in hits])
    with pytest.raises(RetrievalError, match="cannot reach retrieval server"):
        RemoteRetriever(server.url, timeout_s=2.0).retrieve(["Kessrow"], 3)  # stopped by now


def test_slow_and_failing_servers_are_clear_errors_not_hangs(config: Path):
    with LocalRetrievalServer(config, delay_s=2.0) as slow:
        started = time.monotonic()
        with pytest.raises(RetrievalError, match=r"did not answer within 0.5s"):
            RemoteRetriever(slow.url, timeout_s=0.5).retrieve(["Kessrow"], 3)
        assert time.monotonic() - started < 3.0
    with (
        LocalRetrievalServer(config, fail_every=1) as failing,
        pytest.raises(RetrievalError, match=r"answered HTTP 503: .*failure drill"),
    ):
        RemoteRetriever(failing.url, timeout_s=5.0).retrieve(["Kessrow"], 3)


@pytest.mark.slow
def test_gateway_in_remote_mode_plays_through_the_server_and_reports_its_failures(
    tmp_path: Path, cache_dir: Path, config: Path
):
    with LocalRetrievalServer(config) as server:
        remote = search_config(tmp_path, cache_dir, f'retriever = "remote"\nretrieval_url = "{server.url}"\n')
        with LocalGateway(remote, workers=1) as gateway:
            rewards = asyncio.run(expert_rewards(gateway.url, "valid_unseen", per_source=4))
    assert all(r == 1.0 for rs in rewards.values() for r in rs)

    with LocalRetrievalServer(config, fail_every=1) as failing:
        remote = search_config(
            tmp_path, cache_dir, f'retriever = "remote"\nretrieval_url = "{failing.url}"\n'
        )
        with LocalGateway(remote, workers=1) as gateway:

            async def search_once() -> None:
                async with EnvGatewayClient(gateway.url, timeout_s=30.0) as client:
                    start = await client.create_episode(EpisodeCreate(env="search", split="train", seed=0))
                    await client.step(start.episode_id, "search[Kessrow]")

            with pytest.raises(
                EngineError, match=r"HTTP 500: RetrievalError: retrieval server .* answered HTTP 503"
            ):
                asyncio.run(search_once())
