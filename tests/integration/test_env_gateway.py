"""The env gateway as a real server: `turnopd serve env-gateway` in a subprocess on a free loopback
port, driven over HTTP with EnvGatewayClient (and raw httpx for malformed requests)."""

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES, EpisodeCreate, EpisodeStart
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.episode_errors import ActionRejectedError, EpisodeLostError, GatewayBusyError
from services.errors import ConflictError, NotFoundError
from services.loopback import free_loopback_port

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


class Gateway:
    def __init__(self, url: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.url, self.process, self.log = url, process, log

    def client(self) -> EnvGatewayClient:
        return EnvGatewayClient(self.url, timeout_s=120.0)


def start_gateway(workdir: Path, cache_dir: Path, extra: str = "") -> Gateway:
    port = free_loopback_port()
    config = workdir / "gateway.toml"
    config.write_text(
        f'[env_gateway]\ncache_dir = "{cache_dir}"\n{extra}\n'
        "[env_gateway.textworld]\ngames_per_challenge_valid = 1\ngames_per_challenge_train = 2\n"
    )
    log = workdir / "gateway.log"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "services.cli", "serve", "env-gateway", "--port", str(port)]
    with log.open("wb") as sink:
        process = subprocess.Popen([*command, "--config", str(config)], env=env, stdout=sink, stderr=sink)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gateway exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return Gateway(url, process, log)
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"gateway did not become healthy:\n{log.read_text()[-3000:]}")


def stop_gateway(gateway: Gateway) -> None:
    gateway.process.send_signal(signal.SIGINT)
    try:
        gateway.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        gateway.process.kill()
        gateway.process.wait()


@pytest.fixture(scope="module")
def games_cache_dir() -> Path:
    """Generated games are kept between runs (TURNOPD_CACHE_DIR, default ~/.cache/turnopd)."""
    root = Path(os.environ.get("TURNOPD_CACHE_DIR", Path.home() / ".cache" / "turnopd"))
    return root / "test-fixtures" / "envs"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, games_cache_dir):
    server = start_gateway(
        tmp_path_factory.mktemp("gateway"), games_cache_dir, extra="workers = 2\nepisode_ttl_s = 600"
    )
    yield server
    stop_gateway(server)


async def play_expert(client: EnvGatewayClient, request: EpisodeCreate) -> tuple[EpisodeStart, bool, int]:
    """Play one episode with the expert's actions only; delete it; (start, won, turns)."""
    start = await client.create_episode(request)
    action, won, turns = start.expert_action, False, 0
    while action is not None and turns < 80:
        result = await client.step(start.episode_id, action)
        turns += 1
        assert result.turn == turns
        if result.done:
            won = result.won
            assert result.reward == (1.0 if won else 0.0)
            break
        action = result.expert_action
    await client.delete_episode(start.episode_id)
    return start, won, turns


def test_expert_wins_30_valid_unseen_household_episodes_over_http(gateway):
    async def go():
        async with gateway.client() as client:
            requests = [
                EpisodeCreate(env="alfworld", split="valid_unseen", seed=s, expert=True) for s in range(30)
            ]
            return await asyncio.gather(*(play_expert(client, r) for r in requests))

    runs = asyncio.run(go())
    assert [won for _, won, _ in runs] == [True] * 30
    assert Counter(start.task_type for start, _, _ in runs) == {t: 5 for t in HOUSEHOLD_TASK_TYPES}
    assert all(start.game_id.startswith("valid_unseen/") for start, _, _ in runs)
    assert 5 <= sum(turns for _, _, turns in runs) / 30 <= 25


def test_32_concurrent_episodes_all_finish_without_error(gateway):
    async def go():
        async with gateway.client() as client:
            requests = [
                EpisodeCreate(env="alfworld", split="train", seed=1000 + i, expert=True) for i in range(32)
            ]
            runs = await asyncio.gather(*(play_expert(client, r) for r in requests))
            return runs, await client.health()

    runs, health = asyncio.run(go())
    assert all(won for _, won, _ in runs)
    assert len({start.episode_id for start, _, _ in runs}) == 32
    assert health.active_episodes == 0 and health.status == "ok"


def test_textworld_games_are_won_by_their_walkthrough(gateway):
    async def go():
        async with gateway.client() as client:
            catalog = await client.envs()
            challenges = next(e for e in catalog.envs if e.name == "textworld").task_types
            requests = [
                EpisodeCreate(env="textworld", split="valid_unseen", seed=0, task_type=c, expert=True)
                for c in challenges
            ]
            return challenges, [await play_expert(client, r) for r in requests]

    challenges, runs = asyncio.run(go())
    assert challenges == ["tw-simple", "tw-cooking", "tw-treasure_hunter"]
    assert [won for _, won, _ in runs] == [True, True, True]
    assert all("$$$$" not in start.observation and start.objective for start, _, _ in runs)


def test_bad_input_gets_its_4xx_and_leaves_other_episodes_untouched(gateway):
    async def go():
        async with gateway.client() as client, httpx.AsyncClient(base_url=gateway.url) as raw:
            bystander = await client.create_episode(
                EpisodeCreate(env="alfworld", split="valid_unseen", seed=11, expert=True)
            )
            first = await client.step(bystander.episode_id, bystander.expert_action or "")
            victim = await client.create_episode(EpisodeCreate(env="alfworld", split="valid_unseen", seed=12))
            vid = victim.episode_id
            statuses = {}
            for name, method, path, body in [
                ("malformed json", "POST", f"/v1/episodes/{vid}/step", b"{not json"),
                ("missing field", "POST", f"/v1/episodes/{vid}/step", b"{}"),
                ("extra field", "POST", f"/v1/episodes/{vid}/step", b'{"action": "look", "x": 1}'),
                ("wrong type", "POST", f"/v1/episodes/{vid}/step", b'{"action": 3}'),
                ("empty action", "POST", f"/v1/episodes/{vid}/step", b'{"action": ""}'),
                ("unknown env", "POST", "/v1/episodes", b'{"env": "minecraft", "split": "train"}'),
                ("unknown split", "POST", "/v1/episodes", b'{"env": "alfworld", "split": "test"}'),
                (
                    "negative seed",
                    "POST",
                    "/v1/episodes",
                    b'{"env": "alfworld", "split": "train", "seed": -1}',
                ),
                (
                    "unknown task",
                    "POST",
                    "/v1/episodes",
                    b'{"env": "alfworld", "split": "train", "task_type": "x"}',
                ),
                ("unknown episode step", "POST", "/v1/episodes/nope/step", b'{"action": "look"}'),
                ("unknown episode delete", "DELETE", "/v1/episodes/nope", None),
            ]:
                headers = {"content-type": "application/json"}
                statuses[name] = (await raw.request(method, path, content=body, headers=headers)).status_code
            with pytest.raises(ActionRejectedError) as rejected:
                await client.step(vid, "fly to the moon")
            # The rejected action used no turn and changed nothing: the next valid step is turn 1.
            after = await client.step(vid, victim.admissible_actions[0])
            await client.delete_episode(vid)
            with pytest.raises(NotFoundError):
                await client.step(vid, "look")
            # The bystander goes on where it was and still wins.
            action, turn, won = first.expert_action, first.turn, False
            while action is not None:
                result = await client.step(bystander.episode_id, action)
                turn += 1
                assert result.turn == turn
                won, action = result.won, result.expert_action
                if result.done:
                    break
            with pytest.raises(ConflictError):
                await client.step(bystander.episode_id, "look")
            await client.delete_episode(bystander.episode_id)
            return statuses, rejected.value, after, won

    statuses, rejected, after, won = asyncio.run(go())
    assert statuses == {
        "malformed json": 422,
        "missing field": 422,
        "extra field": 422,
        "wrong type": 422,
        "empty action": 422,
        "unknown env": 422,
        "unknown split": 422,
        "negative seed": 422,
        "unknown task": 422,
        "unknown episode step": 404,
        "unknown episode delete": 404,
    }
    assert any("'fly'" in p for p in rejected.problems) and rejected.admissible_actions
    assert after.turn == 1
    assert won


def test_openapi_and_metrics_are_served(gateway):
    spec = httpx.get(f"{gateway.url}/openapi.json").json()
    assert {"/healthz", "/metrics", "/v1/envs", "/v1/episodes", "/v1/episodes/{episode_id}/step"} <= set(
        spec["paths"]
    )
    assert {"EpisodeCreate", "EpisodeStart", "StepRequest", "StepResult", "ActionRejected"} <= set(
        spec["components"]["schemas"]
    )
    metrics = httpx.get(f"{gateway.url}/metrics").text
    for name in (
        "turnopd_env_episodes_created_total",
        "turnopd_env_episodes_active",
        "turnopd_env_episodes_finished_total",
        "turnopd_env_steps_total",
        "turnopd_env_step_latency_seconds_bucket",
        "turnopd_env_rejected_actions_total",
        "turnopd_env_worker_restarts_total",
    ):
        assert name in metrics


def test_killed_worker_is_replaced_and_only_its_episodes_are_lost(gateway):
    async def go():
        async with gateway.client() as client:
            before = await client.health()
            starts = [
                await client.create_episode(
                    EpisodeCreate(env="alfworld", split="valid_unseen", seed=s, expert=True)
                )
                for s in (20, 21)
            ]
            os.kill(before.worker_pids[0], signal.SIGKILL)
            outcomes = []
            for start in starts:
                try:
                    outcomes.append(await client.step(start.episode_id, start.expert_action or ""))
                except EpisodeLostError as exc:
                    outcomes.append(exc)
            for _ in range(100):
                after = await client.health()
                if after.status == "ok":
                    break
                await asyncio.sleep(0.1)
            _, won, _ = await play_expert(
                client, EpisodeCreate(env="alfworld", split="valid_unseen", seed=22, expert=True)
            )
            for start in starts:
                await client.delete_episode(start.episode_id)
            return before, outcomes, after, won

    before, outcomes, after, won = asyncio.run(go())
    lost = [o for o in outcomes if isinstance(o, EpisodeLostError)]
    assert len(lost) == 1 and "start a new episode" in str(lost[0])
    assert after.status == "ok" and after.workers == 2
    assert after.worker_restarts == before.worker_restarts + 1
    assert after.worker_pids[0] != before.worker_pids[0] and after.worker_pids[1] == before.worker_pids[1]
    assert won and gateway.process.poll() is None


def test_idle_episodes_expire_and_a_full_gateway_answers_503(tmp_path, games_cache_dir):
    extra = "workers = 1\nepisode_ttl_s = 3.0\nmax_episodes_per_worker = 2"
    server = start_gateway(tmp_path, games_cache_dir, extra=extra)
    try:

        async def go():
            async with server.client() as client:
                starts = [
                    await client.create_episode(EpisodeCreate(env="alfworld", split="train", seed=s))
                    for s in (5, 6)
                ]
                with pytest.raises(GatewayBusyError, match="host 2 episodes"):
                    await client.create_episode(EpisodeCreate(env="alfworld", split="train", seed=7))
                await asyncio.sleep(4.0)
                with pytest.raises(NotFoundError, match="expired"):
                    await client.step(starts[0].episode_id, starts[0].admissible_actions[0])
                # Expired episodes free their places.
                await client.create_episode(EpisodeCreate(env="alfworld", split="train", seed=7))
                return await client.health()

        assert asyncio.run(go()).active_episodes == 1
        assert "turnopd_env_episodes_expired_total 2.0" in httpx.get(f"{server.url}/metrics").text
    finally:
        stop_gateway(server)
