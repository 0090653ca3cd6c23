"""The `webshop` env for real: the embedded shop behind a `turnopd serve env-gateway` child process,
the project's own agentenv_webshop server (`turnopd serve webshop`) as a separate process, the
gateway's remote adapter against it -- timeouts and 5xx answers included -- and `turnopd eval`."""

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from rollout_fixtures import zoo_cache_dir

from services.cache_dir import resolve_cache_dir
from services.contracts.env_gateway import EpisodeCreate, EpisodeStart, StepResult
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.episode_errors import ActionRejectedError, EngineError
from services.env_gateway.local_server import LocalGateway
from services.envs.webshop.backend import load_shop
from services.envs.webshop.remote import AgentGymWebShopClient, RemoteShopError
from services.envs.webshop.settings import WebShopSettings
from services.envs.webshop.vocabulary import CATEGORIES
from services.loopback import free_loopback_port

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
MAX_ENVS = 4
REMOTE_TIMEOUT_S = 2.0
_MARKER = re.compile(r"\[WEBSHOP_FINAL_SCORE=([0-9.]+)\]$")


def games_dir() -> Path:
    return resolve_cache_dir() / "test-fixtures" / "envs"


def write_config(directory: Path, extra: str = "") -> Path:
    config = directory / "turnopd.toml"
    config.write_text(
        f'[env_gateway]\ncache_dir = "{games_dir()}"\nworkers = 1\nepisode_ttl_s = 300\n'
        f"[env_gateway.webshop]\n{extra}\n"
    )
    return config


class ShopServer:
    """`turnopd serve webshop` in a child process on a free loopback port."""

    def __init__(self, config: Path, log: Path) -> None:
        self.port = free_loopback_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "services.cli", "serve", "webshop", "--port", str(self.port)]
        command += ["--max-envs", str(MAX_ENVS), "--config", str(config)]
        self.log = log
        with log.open("wb") as sink:
            self.process = subprocess.Popen(
                command, stdout=sink, stderr=sink, env=dict(os.environ, PYTHONPATH=str(REPO))
            )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"webshop server exited:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url, timeout=1.0).json() == "ok":
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"webshop server did not come up:\n{log.read_text()[-3000:]}")

    def open_envs(self) -> list[int]:
        envs: list[int] = httpx.get(f"{self.url}/list_envs", timeout=5.0).json()
        return envs

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def shop_server(tmp_path_factory) -> Iterator[ShopServer]:
    directory = tmp_path_factory.mktemp("shop-server")
    server = ShopServer(write_config(directory), directory / "server.log")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory) -> Iterator[LocalGateway]:
    with LocalGateway(write_config(tmp_path_factory.mktemp("gateway")), workers=1) as server:
        yield server


@pytest.fixture(scope="module")
def remote_gateway(tmp_path_factory, shop_server: ShopServer) -> Iterator[LocalGateway]:
    extra = f'remote_url = "{shop_server.url}"\nremote_timeout_s = {REMOTE_TIMEOUT_S}\n'
    with LocalGateway(write_config(tmp_path_factory.mktemp("remote"), extra), workers=1) as server:
        yield server


async def play_expert(
    client: EnvGatewayClient, seed: int, split: str = "valid_unseen"
) -> tuple[EpisodeStart, list[StepResult]]:
    start = await client.create_episode(EpisodeCreate(env="webshop", split=split, seed=seed, expert=True))
    results: list[StepResult] = []
    action = start.expert_action
    while action is not None and len(results) < 30:
        results.append(await client.step(start.episode_id, action))
        action = results[-1].expert_action
    await client.delete_episode(start.episode_id)
    return start, results


def play_all(
    url: str, seeds: range, split: str = "valid_unseen"
) -> list[tuple[EpisodeStart, list[StepResult]]]:
    async def run() -> list[tuple[EpisodeStart, list[StepResult]]]:
        limit = asyncio.Semaphore(4)

        async def one(seed: int) -> tuple[EpisodeStart, list[StepResult]]:
            async with limit:
                return await play_expert(client, seed, split)

        async with EnvGatewayClient(url, timeout_s=60.0) as client:
            return await asyncio.gather(*(one(s) for s in seeds))

    return asyncio.run(run())


def test_expert_over_http_scores_at_least_95_percent_on_eval_goals(gateway: LocalGateway):
    runs = play_all(gateway.url, range(60))
    rewards = [results[-1].reward for _, results in runs]
    assert sum(rewards) / len(rewards) >= 0.95
    assert all(results[-1].done for _, results in runs)
    assert [start.game_id for start, _ in runs] == [f"valid_unseen/goal_{g:05d}" for g in range(60)]
    assert {start.task_type for start, _ in runs} == set(CATEGORIES)
    for _, results in runs:
        marker = _MARKER.search(results[-1].observation)
        assert marker is not None and float(marker.group(1)) == pytest.approx(results[-1].reward)
        assert results[-1].won == (results[-1].reward == 1.0)
        assert all(r.reward == 0.0 and not r.done for r in results[:-1])


def test_catalog_lists_webshop_with_its_goal_partition(gateway: LocalGateway):
    async def catalog():  # type: ignore[no-untyped-def]
        async with EnvGatewayClient(gateway.url) as client:
            return await client.envs()

    info = next(e for e in asyncio.run(catalog()).envs if e.name == "webshop")
    assert info.task_types == list(CATEGORIES)
    assert info.games_per_split == {"train": 3000, "valid_unseen": 200}


def test_a_click_not_on_the_page_is_rejected_without_a_step(gateway: LocalGateway):
    async def go():  # type: ignore[no-untyped-def]
        async with EnvGatewayClient(gateway.url) as client:
            start = await client.create_episode(EpisodeCreate(env="webshop", split="train", seed=5))
            with pytest.raises(ActionRejectedError) as rejected:
                await client.step(start.episode_id, "click[Buy Now]")
            searched = await client.step(start.episode_id, "search[ Vegan   LIPSTICK ]")
            await client.delete_episode(start.episode_id)
            return start, rejected.value, searched

    start, rejected, searched = asyncio.run(go())
    assert start.admissible_actions == ["search[<your keywords>]"]
    assert rejected.admissible_actions == ["search[<your keywords>]"]
    assert searched.turn == 1 and "Page 1 (Total results: 50)" in searched.observation
    assert "Lipstick" in searched.observation and searched.admissible_actions[0] == "click[Back to Search]"


def test_the_server_speaks_agentgym_and_serves_the_embedded_shops_pages(shop_server: ShopServer):
    client = AgentGymWebShopClient(shop_server.url, 10.0)
    local = load_shop(WebShopSettings(), games_dir()).session(205)
    env = client.create()
    try:
        assert env in shop_server.open_envs()
        assert client.reset(env, 205) == local.observation() == client.observation(env)
        assert client.instruction_text(env) == local.instruction
        actions = client.available_actions(env)
        assert (actions.has_search_bar, actions.clickables) == (True, [])
        step = client.step(env, "search[bed frame]")
        local.step("search[bed frame]")
        assert (step.state, step.reward, step.done) == (local.observation(), 0.0, False)
        assert client.available_actions(env).clickables == local.clickables()
        unchanged = client.step(env, "click[Nowhere]")  # WebShop: an impossible action does nothing
        assert unchanged.state == step.state and not unchanged.done
    finally:
        assert client.close(env) and not client.close(env)


def test_remote_gateway_plays_exactly_the_embedded_episodes(
    gateway: LocalGateway, remote_gateway: LocalGateway
):
    embedded = play_all(gateway.url, range(8), split="train")
    remote = play_all(remote_gateway.url, range(8), split="train")
    for (start, results), (remote_start, remote_results) in zip(embedded, remote, strict=True):
        assert remote_start.game_id == start.game_id and remote_start.task_type == "goal"
        assert (remote_start.observation, remote_start.objective) == (start.observation, start.objective)
        assert [r.model_dump() for r in remote_results] == [r.model_dump() for r in results]
    assert sum(results[-1].reward for _, results in remote) / 8 >= 0.95


def test_a_full_server_is_a_503_reported_as_the_episodes_error(
    shop_server: ShopServer, remote_gateway: LocalGateway
):
    direct = AgentGymWebShopClient(shop_server.url, 10.0)
    free = MAX_ENVS - len(shop_server.open_envs())

    async def go():  # type: ignore[no-untyped-def]
        async with EnvGatewayClient(remote_gateway.url) as client:
            held = [
                await client.create_episode(EpisodeCreate(env="webshop", split="train", seed=s))
                for s in range(free)
            ]
            with pytest.raises(EngineError) as full:
                await client.create_episode(EpisodeCreate(env="webshop", split="train", seed=99))
            for start in held:
                await client.delete_episode(start.episode_id)
            again = await client.create_episode(EpisodeCreate(env="webshop", split="train", seed=99))
            await client.delete_episode(again.episode_id)
            return full.value

    full = asyncio.run(go())
    assert "answered HTTP 503 to POST /create" in str(full) and f"all {MAX_ENVS} envs are open" in str(full)
    with pytest.raises(RemoteShopError, match="HTTP 404 to GET /observation"):
        direct.observation(10_000)


def test_a_frozen_server_is_a_timeout_error_never_a_hang(
    shop_server: ShopServer, remote_gateway: LocalGateway
):
    async def go():  # type: ignore[no-untyped-def]
        async with EnvGatewayClient(remote_gateway.url, timeout_s=60.0) as client:
            start = await client.create_episode(EpisodeCreate(env="webshop", split="train", seed=1))
            os.kill(shop_server.process.pid, signal.SIGSTOP)
            began = time.monotonic()
            try:
                with pytest.raises(EngineError) as timed_out:
                    await client.step(start.episode_id, "search[office chair]")
                waited = time.monotonic() - began
                with pytest.raises(RemoteShopError, match=r"did not answer POST /create within 1s"):
                    AgentGymWebShopClient(shop_server.url, 1.0).create()
            finally:
                os.kill(shop_server.process.pid, signal.SIGCONT)
            after = await play_expert(client, 2, split="train")  # the gateway still serves new episodes
            return timed_out.value, waited, after

    timed_out, waited, (_, results) = asyncio.run(go())
    message = str(timed_out)
    assert f"did not answer POST /step within {REMOTE_TIMEOUT_S:g}s" in message and shop_server.url in message
    assert waited < 30.0 and results[-1].done


@pytest.mark.slow
def test_eval_command_reports_mean_reward_per_category_for_the_tiny_student(tmp_path):
    config = write_config(tmp_path)
    config.write_text(config.read_text() + f'\n[models]\ncache_dir = "{zoo_cache_dir()}"\n')
    command = [sys.executable, "-m", "services.cli", "eval", "--model", "student", "--env", "webshop"]
    command += ["--episodes", "5", "--n", "1", "--max-turns", "3", "--max-new-tokens", "24", "--seed", "0"]
    done = subprocess.run(
        [*command, "--json", "--config", str(config)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert (report["env"], report["split"], report["episodes"], report["failed_episodes"]) == (
        "webshop",
        "valid_unseen",
        5,
        0,
    )
    assert set(report["per_task_type"]) == set(CATEGORIES)  # one game of each category
    assert 0.0 <= report["mean_reward"] <= 1.0 and report["success_rate"] <= report["mean_reward"] + 1e-9
    assert all(0.0 <= s["mean_reward"] <= 1.0 for s in report["per_task_type"].values())
