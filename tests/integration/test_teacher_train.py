"""Teacher training against a real env gateway (a `turnopd serve env-gateway` child process):
expert episodes collected over HTTP and cached, a few training steps, and the proof that the
training sequences are exactly what the agent loop records when the model answers like the expert.
"""

import asyncio
from pathlib import Path

import pytest
from rollout_fixtures import ReplayEngine, gateway_config, zoo_cache_dir

from services.agent.chat_format import ChatFormat
from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES
from services.contracts.rollout import EpisodeTask
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.local_server import LocalGateway
from services.models.loading import load_causal_lm, load_tokenizer
from services.rollout_worker.agent_loop import play_episodes
from services.settings.loader import load_recipe
from services.teacher_training.pipeline import expert_datasets, train_teacher
from services.teacher_training.rendering import render_episodes

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    with LocalGateway(gateway_config(tmp_path_factory.mktemp("gateway")), workers=1) as server:
        yield server


def test_collect_cache_train_and_match_the_agent_loop(gateway: LocalGateway, tmp_path: Path):
    zoo = zoo_cache_dir()
    settings = load_recipe(
        None,
        {
            "models": {"cache_dir": str(tmp_path)},
            "sft": {
                "gateway_url": gateway.url,
                "episodes": 6,
                "seed": 0,
                "base": str(zoo / "models" / "student"),
                "out": "student-sft",
                "epochs": 2,
                "batch_episodes": 3,
                "lr": 3e-3,
                "warmup_frac": 0.0,
                # Expert-only episodes: the agent loop must replay them token for token (detours and
                # rejected attempts are rendered but never targets; unit-tested in test_rendering.py).
                "detour_rate": 0.0,
            },
        },
    )
    (dataset,) = expert_datasets(settings)
    assert not dataset.cached and dataset.info.episodes == 6 and dataset.info.dropped == 0
    assert sorted(e.start.task_type for e in dataset.episodes) == sorted(HOUSEHOLD_TASK_TYPES)
    assert all(e.won and e.start.game_id.startswith("train/") for e in dataset.episodes)
    (again,) = expert_datasets(settings)
    assert again.cached and again.episodes == dataset.episodes

    trained = train_teacher(settings, [dataset])
    assert trained.path == tmp_path / "models" / "student-sft"
    assert trained.summary.steps == 4 and trained.summary.losses[-1] < trained.summary.losses[0]
    assert load_causal_lm("student-sft", cache_dir=tmp_path).num_parameters() > 0

    chat = ChatFormat(load_tokenizer("student-sft", tmp_path))
    rendered = render_episodes(chat, dataset.episodes)
    engine = ReplayEngine(rendered, chat.tokenizer.convert_tokens_to_ids("<|im_end|>"))
    tasks = [EpisodeTask(env="alfworld", split="train", seed=e.start.seed) for e in dataset.episodes]

    async def play():  # type: ignore[no-untyped-def]
        async with EnvGatewayClient(gateway.url) as client:
            return await play_episodes(engine, chat, client, tasks, 80, 0.0, 64, seed=0)

    trajectories, failures = asyncio.run(play())
    assert failures == []
    for trajectory, episode in zip(trajectories, rendered, strict=True):
        assert trajectory.success
        assert trajectory.token_ids == episode.token_ids
        assert [(t.response_start, t.response_end) for t in trajectory.turns] == episode.response_spans
