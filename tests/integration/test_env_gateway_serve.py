"""The env gateway as the Ray Serve app `env-gateway` on a local Ray cluster: same API, same games."""

import asyncio
import os
import socket
from pathlib import Path

import pytest

from services.contracts.env_gateway import EpisodeCreate
from services.env_gateway.client import EnvGatewayClient
from services.settings.env_gateway import EnvGatewaySettings

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_app_plays_a_household_episode(ray_session):
    from ray import serve

    from services.env_gateway.serve_app import ROUTE_PREFIX, SERVE_APP_NAME, build_app

    cache = (
        Path(os.environ.get("TURNOPD_CACHE_DIR", Path.home() / ".cache" / "turnopd"))
        / "test-fixtures"
        / "envs"
    )
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    settings = EnvGatewaySettings(workers=1, replica_num_cpus=0.5, cache_dir=cache)
    serve.run(build_app(settings), name=SERVE_APP_NAME, route_prefix=ROUTE_PREFIX)
    try:

        async def go():
            async with EnvGatewayClient(f"http://127.0.0.1:{port}{ROUTE_PREFIX}") as client:
                health = await client.health()
                start = await client.create_episode(
                    EpisodeCreate(env="alfworld", split="valid_unseen", seed=2, expert=True)
                )
                action, won = start.expert_action, False
                while action is not None:
                    result = await client.step(start.episode_id, action)
                    if result.done:
                        won = result.won
                        break
                    action = result.expert_action
                await client.delete_episode(start.episode_id)
                return health, start, won

        health, start, won = asyncio.run(go())
        assert health.status == "ok" and health.workers == 1
        assert start.task_type == "pick_heat_then_place" and won
        assert SERVE_APP_NAME in serve.status().applications
    finally:
        serve.delete(SERVE_APP_NAME)
        serve.shutdown()
