"""Teacher training on the search env through config alone: expert episodes collected over a real
gateway, a few SFT steps, and the proof that the training sequences are what the agent loop
records when the model answers like the expert (same chat, tool and Search-R1 prompt)."""

import asyncio
from pathlib import Path

import pytest
from rollout_fixtures import ReplayEngine, zoo_cache_dir

from services.agent.chat_format import ChatFormat
from services.contracts.rollout import EpisodeTask
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.local_server import LocalGateway
from services.envs.protocols import SEARCH_PROTOCOL
from services.models.loading import load_tokenizer
from services.rollout_worker.agent_loop import play_episodes
from services.settings.loader import load_recipe
from services.teacher_training.pipeline import expert_datasets, train_teacher
from services.teacher_training.rendering import render_episodes

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_collect_and_train_on_search_and_match_the_agent_loop(tmp_path: Path, test_cache_dir: Path):
    zoo = zoo_cache_dir()
    config = tmp_path / "search.toml"
    config.write_text(f'[env_gateway]\ncache_dir = "{test_cache_dir / "envs"}"\nworkers = 1\n')
    with LocalGateway(config, workers=1) as gateway:
        settings = load_recipe(
            config,
            {
                "models": {"cache_dir": str(tmp_path)},
                "sft": {
                    "env": "search",
                    "gateway_url": gateway.url,
                    "episodes": 6,
                    "base": str(zoo / "models" / "student"),
                    "out": "student-search-sft",
                    "epochs": 2,
                    "batch_episodes": 3,
                    "lr": 3e-3,
                    "warmup_frac": 0.0,
                },
            },
        )
        (dataset,) = expert_datasets(settings)
        assert dataset.info.env == "search" and dataset.info.episodes == 6 and dataset.info.dropped == 0
        assert sorted({e.start.task_type for e in dataset.episodes}) == ["single_hop", "three_hop", "two_hop"]
        assert all(e.won and e.start.game_id.startswith("train/") for e in dataset.episodes)
        assert all(e.turns[-1].action.startswith("answer[") for e in dataset.episodes)

        trained = train_teacher(settings, [dataset])
        assert trained.summary.steps == 4 and trained.summary.losses[-1] < trained.summary.losses[0]

        chat = SEARCH_PROTOCOL.chat(ChatFormat(load_tokenizer("student-search-sft", tmp_path)))
        rendered = render_episodes(chat, dataset.episodes, protocol=SEARCH_PROTOCOL)
        engine = ReplayEngine(rendered, chat.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        tasks = [EpisodeTask(env="search", split="train", seed=e.start.seed) for e in dataset.episodes]

        async def play():  # type: ignore[no-untyped-def]
            async with EnvGatewayClient(gateway.url) as client:
                return await play_episodes(
                    engine, ChatFormat(chat.tokenizer), client, tasks, 50, 0.0, 64, seed=0
                )

        trajectories, failures = asyncio.run(play())
    assert failures == []
    for trajectory, episode in zip(trajectories, rendered, strict=True):
        assert trajectory.success and trajectory.reward == 1.0
        assert trajectory.token_ids == episode.token_ids
        assert [(t.response_start, t.response_end) for t in trajectory.turns] == episode.response_spans
