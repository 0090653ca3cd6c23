"""A resumed multi-environment run: every service gets the settings the run saved in its config.json,
the env gateway's own process included (it plays the environments the run started with)."""

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from services.cache_dir import resolve_cache_dir
from services.cli.train_cmd import resumed_settings
from services.contracts.env_gateway import EnvCatalog, EpisodeCreate
from services.env_gateway.client import EnvGatewayClient
from services.operations.env_gateway_ops import EnvGatewayOps
from services.operations.managed_service import Change, RunContext
from services.operations.run_pieces import RunPieces
from services.operations.run_services import Services
from services.run_dir import RunDir
from services.settings import load_settings
from services.settings.env_gateway import EnvGatewaySettings

pytestmark = pytest.mark.integration

# Every [env_gateway.*] value differs from its default, so a gateway on the defaults shows at once.
CONFIG = """
[run]
run_dir = "{run_dir}"

[rollout]
max_turns = 6

[[sources]]
env = "alfworld"
share = 0.5
teacher = "teacher"

[[sources]]
env = "search"
share = 0.25
teacher = "teacher-search"
max_turns = 3

[[sources]]
env = "webshop"
share = 0.25
teacher = "teacher-shop"

[env_gateway]
cache_dir = "{games}"
workers = 1
port = 0

[env_gateway.search]
topk = 2
max_turns = 3

[env_gateway.webshop]
products = 40
catalogue_seed = 3
goals_eval = 7
goals_train = 20
"""


def multi_env_config(tmp_path: Path) -> Path:
    games = resolve_cache_dir() / "test-fixtures" / "envs"
    config = tmp_path / "multi.toml"
    config.write_text(CONFIG.format(run_dir=tmp_path / "run", games=games))
    return config


async def catalog_and_search_turns(url: str) -> tuple[EnvCatalog, int]:
    """The gateway's catalog, and after how many searches a search episode ends."""
    async with EnvGatewayClient(url, timeout_s=120.0) as client:
        catalog = await client.envs()
        start = await client.create_episode(EpisodeCreate(env="search", split="train", seed=0))
        for turn in range(1, 60):
            result = await client.step(start.episode_id, "search[the capital]")
            if result.done:
                return catalog, turn
    raise AssertionError("the search episode never ended")


def test_a_resumed_run_gives_every_service_the_settings_it_started_with(tmp_path):
    original = load_settings(multi_env_config(tmp_path))
    run = RunDir(original.run.run_dir)
    run.create(original)

    resumed = resumed_settings(run)  # what `turnopd train --resume DIR` runs with
    first = Services.of(RunContext(pieces=RunPieces.of(original), run=run, run_id="r"))
    again = Services.of(RunContext(pieces=RunPieces.of(resumed), run=run, run_id="r"))
    for before, after in zip(first.in_start_order(), again.in_start_order(), strict=True):
        assert after.settings == before.settings, before.kind

    gateway = EnvGatewayOps(RunContext(pieces=RunPieces.of(resumed), run=run, run_id="r"), Counter())
    gateway.start()  # the local gateway process, as the resumed run starts it
    try:
        assert_plays_the_saved_environments(gateway.url)
        # `turnopd restart env-gateway` without --config: a fresh process on the same settings
        gateway.replace(Change(), step=1)
        assert_plays_the_saved_environments(gateway.url)
    finally:
        gateway.stop()
    # what each gateway process was given, beside its log
    for name in ("env_gateway.settings.json", "env_gateway.1.settings.json"):
        assert EnvGatewaySettings.model_validate_json(run.path(name).read_text()) == original.env_gateway


def assert_plays_the_saved_environments(url: str) -> None:
    catalog, turns = asyncio.run(catalog_and_search_turns(url))
    envs = {info.name: info for info in catalog.envs}
    assert envs["webshop"].games_per_split == {"train": 20, "valid_unseen": 7}
    assert "40 products, catalogue seed 3" in envs["webshop"].source
    assert "top 2" in envs["search"].source
    assert turns == 3  # [env_gateway.search] max_turns, not the default 50
