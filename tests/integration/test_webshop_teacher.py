"""Teacher training on webshop through config alone (`[sft] env = "webshop"`): expert episodes
collected from a real gateway over HTTP, a tiny SFT run, and the proof that the training text is
exactly what the agent loop records when the model answers like the expert (webshop_step tool
calls, free-text searches admitted, the score on the last step)."""

import asyncio
from pathlib import Path

import pytest
from rollout_fixtures import ReplayEngine, zoo_cache_dir

from services.agent.chat_format import ChatFormat
from services.cache_dir import resolve_cache_dir
from services.contracts.rollout import EpisodeTask
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.local_server import LocalGateway
from services.envs.protocols import WEBSHOP_PROTOCOL
from services.models.loading import load_tokenizer
from services.rollout_worker.agent_loop import play_episodes
from services.settings.loader import load_recipe
from services.teacher_training.pipeline import expert_datasets, train_teacher
from services.teacher_training.rendering import render_episodes

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("webshop-sft") / "turnopd.toml"
    games = resolve_cache_dir() / "test-fixtures" / "envs"
    path.write_text(
        f'[env_gateway]\ncache_dir = "{games}"\nworkers = 1\n'
        '[rollout]\nenv = "webshop"\nmax_turns = 30\n[sft]\nenv = "webshop"\n'
    )
    return path


def test_webshop_expert_data_trains_and_replays_through_the_agent_loop(config: Path, tmp_path: Path):
    zoo = zoo_cache_dir()
    overrides = {
        "models": {"cache_dir": str(tmp_path)},
        "sft": {
            "episodes": 4,
            "seed": 0,
            "base": str(zoo / "models" / "student"),
            "out": "student-webshop-sft",
            "epochs": 2,
            "batch_episodes": 2,
            "lr": 3e-3,
            "warmup_frac": 0.0,
            "max_sequence_tokens": 8192,
        },
    }
    with LocalGateway(config, workers=1) as gateway:
        settings = load_recipe(config, {**overrides, "sft": {**overrides["sft"], "gateway_url": gateway.url}})
        (dataset,) = expert_datasets(settings)
        assert dataset.info.env == "webshop" and dataset.info.episodes == 4 and dataset.info.dropped == 0
        assert all(e.won and e.start.game_id.startswith("train/goal_") for e in dataset.episodes)
        assert all(e.turns[0].action.startswith("search[") for e in dataset.episodes)
        assert all(e.turns[-1].action == "click[Buy Now]" for e in dataset.episodes)

        trained = train_teacher(settings, [dataset])
        assert trained.summary.steps == 4 and trained.summary.losses[-1] < trained.summary.losses[0]

        chat = WEBSHOP_PROTOCOL.chat(ChatFormat(load_tokenizer("student-webshop-sft", tmp_path)))
        rendered = render_episodes(chat, dataset.episodes, protocol=WEBSHOP_PROTOCOL)
        first_response = chat.tokenizer.decode(rendered[0].token_ids[slice(*rendered[0].response_spans[0])])
        assert '"name": "webshop_step"' in first_response and "search[" in first_response
        engine = ReplayEngine(rendered, chat.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        tasks = [EpisodeTask(env="webshop", split="train", seed=e.start.seed) for e in dataset.episodes]

        async def play():  # type: ignore[no-untyped-def]
            async with EnvGatewayClient(gateway.url) as client:
                return await play_episodes(
                    engine, ChatFormat(chat.tokenizer), client, tasks, 30, 0.0, 64, seed=0
                )

        trajectories, failures = asyncio.run(play())
    assert failures == []
    for trajectory, episode in zip(trajectories, rendered, strict=True):
        assert (
            trajectory.success
            and trajectory.reward == 1.0
            and trajectory.task_type
            in {
                "beauty",
                "electronics",
                "fashion",
                "food",
                "furniture",
            }
        )
        assert all(turn.accepted for turn in trajectory.turns)
        assert trajectory.token_ids == episode.token_ids
        assert [(t.response_start, t.response_end) for t in trajectory.turns] == episode.response_spans
