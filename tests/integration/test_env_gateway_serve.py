"""The env gateway as the Ray Serve app `env-gateway` on a local Ray cluster: the same HTTP API,
two shards with their own env workers, and every episode's requests reaching its own shard."""

import asyncio
import os
from pathlib import Path

import httpx
import pytest

from services.contracts.env_gateway import EpisodeCreate
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.episode_errors import ActionRejectedError
from services.errors import NotFoundError
from services.settings.env_gateway import EnvGatewaySettings

pytestmark = pytest.mark.integration


async def play(client: EnvGatewayClient, seed: int) -> tuple[str, bool]:
    start = await client.create_episode(
        EpisodeCreate(env="alfworld", split="valid_unseen", seed=seed, expert=True)
    )
    action, won = start.expert_action, False
    while action is not None:
        result = await client.step(start.episode_id, action)
        if result.done:
            won = result.won
            break
        action = result.expert_action
    await client.delete_episode(start.episode_id)
    return start.episode_id, won


def test_serve_app_shards_episodes_and_plays_them(serve_port):
    from ray import serve

    from services.env_gateway.serve_app import ROUTE_PREFIX, gateway_application
    from services.ray_names import ENV_GATEWAY_APP as SERVE_APP_NAME

    cache = (
        Path(os.environ.get("TURNOPD_CACHE_DIR", Path.home() / ".cache" / "turnopd"))
        / "test-fixtures"
        / "envs"
    )
    settings = EnvGatewaySettings(replicas=2, workers=1, replica_num_cpus=0.5, cache_dir=cache)
    serve.run(gateway_application(settings), name=SERVE_APP_NAME, route_prefix=ROUTE_PREFIX)
    url = f"http://127.0.0.1:{serve_port}{ROUTE_PREFIX}"
    try:

        async def go():
            async with EnvGatewayClient(url) as client:
                health = await client.health()
                runs = await asyncio.gather(*(play(client, seed) for seed in range(4)))
                for foreign in ("s7-nope", "s0-nope"):  # no such shard; a shard without it
                    with pytest.raises(NotFoundError):
                        await client.step(foreign, "look")
                start = await client.create_episode(EpisodeCreate(env="alfworld", split="train", seed=1))
                with pytest.raises(ActionRejectedError) as rejected:
                    await client.step(start.episode_id, "fly to the moon")
                assert rejected.value.admissible_actions == start.admissible_actions
                await client.delete_episode(start.episode_id)
                return health, runs, await client.envs()

        health, runs, catalog = asyncio.run(go())
        assert health.status == "ok" and health.workers == 2 and len(set(health.worker_pids)) == 2
        assert all(won for _, won in runs)
        assert {episode_id.split("-")[0] for episode_id, _ in runs} == {"s0", "s1"}
        assert {"alfworld", "textworld", "search", "webshop"} <= {env.name for env in catalog.envs}
        metrics = httpx.get(f"{url}/metrics").text
        assert 'turnopd_env_steps_total{env="alfworld",shard="0"}' in metrics
        assert 'turnopd_env_steps_total{env="alfworld",shard="1"}' in metrics
        assert SERVE_APP_NAME in serve.status().applications
    finally:
        serve.delete(SERVE_APP_NAME)
