"""The gateway's token crosses into its env worker processes (on their stdin, not their
environment): a real worker plays a remote webshop episode on a server holding that token, and
a gateway without it gets the refusal named in the episode's error."""

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from services.contracts.env_gateway import EpisodeCreate
from services.env_gateway.episode_errors import EngineError
from services.env_gateway.runtime import GatewayRuntime
from services.envs.webshop.catalogue import generate_catalogue
from services.envs.webshop.goals import GoalBook, GoalSplits
from services.envs.webshop.server import create_app
from services.envs.webshop.server_envs import ShopEnvs
from services.envs.webshop.settings import WebShopSettings
from services.envs.webshop.shop import Shop
from services.loopback import free_loopback_port
from services.service_auth import TOKEN_ENV
from services.settings.env_gateway import EnvGatewaySettings

pytestmark = pytest.mark.integration
TOKEN = "worker-token"


@pytest.fixture(scope="module")
def shop_url() -> Iterator[str]:
    """A webshop server app with ``TOKEN``, served by uvicorn from a thread on a loopback port."""
    catalogue = generate_catalogue(0, 60)
    shop = Shop(catalogue, GoalBook(catalogue, GoalSplits(5, 10)), results_per_page=10, max_results=50)
    port = free_loopback_port()
    app = create_app(ShopEnvs(shop, max_envs=4, rng=random.Random(0)), token=TOKEN)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the webshop server did not start"
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


async def open_remote_episode(settings: EnvGatewaySettings, token: str | None) -> str:
    runtime = GatewayRuntime(settings, token)
    await runtime.start()
    try:
        start = await runtime.create(EpisodeCreate(env="webshop", split="valid_unseen", seed=1))
        return start.observation
    finally:
        await runtime.stop()


def test_env_workers_send_the_gateways_token(shop_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)  # the token must come from the gateway, not the environment
    webshop = WebShopSettings(remote_url=shop_url, goals_eval=5, goals_train=10)
    settings = EnvGatewaySettings(cache_dir=tmp_path, workers=1, webshop=webshop)
    assert asyncio.run(open_remote_episode(settings, TOKEN)).startswith("WebShop [SEP] Instruction:")
    with pytest.raises(EngineError, match=r"demands a service token that this run does not have \(401\)"):
        asyncio.run(open_remote_episode(settings, None))
