"""The rollout pool on the shared Ray session against a real env gateway (a `turnopd serve env-gateway`
subprocess): task order, weight publishing, stale versions refused, a worker killed mid-play, an env
worker killed mid-play."""

import asyncio
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence

import httpx
import pytest
import ray
from rollout_fixtures import gateway_config, rollout_settings, zoo_cache_dir
from scripted_engines import ScriptedEngine

from services.agent.chat_format import ChatFormat
from services.agent.tool_calls import format_response
from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES
from services.contracts.rollout import EpisodeFailure, EpisodeTask, RolloutRequest
from services.contracts.trajectory import Trajectory
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.local_server import LocalGateway
from services.errors import ConflictError
from services.models.loading import load_causal_lm, load_tokenizer
from services.rollout_worker.agent_loop import play_episodes
from services.rollout_worker.engines import Generation, GenerationEngine, GenerationParams, make_engine
from services.rollout_worker.pool import RolloutPool

# the tests share one pool and build on what the ones above published (weights versions), so under
# xdist they run in one worker, in order (a group of their own)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("rollout-pool")]

TASKS = [
    EpisodeTask(env="alfworld", split="valid_unseen", seed=i // 6, task_type=HOUSEHOLD_TASK_TYPES[i % 6])
    for i in range(6)
]


@pytest.fixture(scope="module")
def zoo():
    return zoo_cache_dir()


@pytest.fixture(scope="module")
def settings(tmp_path_factory, zoo):
    return rollout_settings(gateway_config(tmp_path_factory.mktemp("rollout")), zoo)


@pytest.fixture(scope="module")
def gateway(settings, tmp_path_factory):
    config = gateway_config(tmp_path_factory.mktemp("gateway"))
    with LocalGateway(config, workers=1, startup_timeout_s=300) as server:
        yield server


@pytest.fixture(scope="module")
def pool(ray_session, settings, gateway):
    rollout_pool = RolloutPool(
        settings.for_rollout_worker(), settings.cluster.rollout_workers, gateway.url, "student"
    )
    yield rollout_pool
    rollout_pool.close()


def active_episodes(gateway: LocalGateway) -> int:
    return int(httpx.get(f"{gateway.url}/healthz", timeout=5.0).json()["active_episodes"])


def test_agent_loop_plays_the_real_gateway_and_deletes_its_episodes(gateway, zoo):
    engine = make_engine("transformers", "student", cache_dir=zoo, seed=0)
    chat = ChatFormat(load_tokenizer("student", zoo))

    async def go():
        async with EnvGatewayClient(gateway.url) as env:
            return await play_episodes(engine, chat, env, TASKS[:3], 2, 1.0, 24, seed=5)

    trajectories, failures = asyncio.run(go())
    assert failures == []
    assert [t.task_type for t in trajectories] == list(HOUSEHOLD_TASK_TYPES[:3])
    for trajectory in trajectories:
        assert len(trajectory.turns) == 2 and trajectory.truncated and trajectory.split == "valid_unseen"
        assert len(trajectory.sampler_logprobs) == sum(trajectory.turn_tokens)
        assert "Admissible actions: go to " in chat.tokenizer.decode(trajectory.token_ids)
    assert active_episodes(gateway) == 0


def kill_idle(name: str) -> None:
    """SIGKILL worker ``name`` while it is idle (no play notices) and wait until Ray has it back."""
    worker = ray.get_actor(name, namespace="turnopd")
    before = ray.get(worker.health.remote(), timeout=60).pid
    os.kill(before, signal.SIGKILL)
    deadline, back = time.monotonic() + 120, None
    while back is None and time.monotonic() < deadline:
        try:
            health = ray.get(worker.health.remote(), timeout=30)
            back = health if health.pid != before else None
        except ray.exceptions.RayActorError:
            pass
        time.sleep(0.2)
    assert back is not None and back.weights_version == 0  # Ray brought it back at version 0


def student_weights(zoo) -> dict:
    weights = load_causal_lm("student", cache_dir=zoo).state_dict()
    weights.pop("lm_head.weight", None)  # as the learner publishes a tied model
    return weights


def test_a_worker_restarted_at_version_0_plays_on_and_is_counted_at_the_first_publish(pool, zoo):
    """Before the first publish a restarted worker holds the right version (0), so nothing fails;
    the pool still tells the restart by the actor's new incarnation."""
    assert pool.weights_version == 0
    kill_idle("rollout-worker-1")
    result = pool.play(TASKS[:2], h_roll=1, temperature=1.0, weights_version=0)
    assert result.failures == [] and pool.stats.crashes_by_worker[1] == 0
    pool.publish_weights(ray.put(student_weights(zoo)), 1)
    assert dict(pool.stats.crashes_by_worker) == {1: 1}
    assert pool.workers_versions() == {"rollout-worker-0": 1, "rollout-worker-1": 1}


def test_pool_returns_every_task_in_order_and_refuses_stale_versions(pool, zoo):
    result = pool.play(TASKS, h_roll=2, temperature=1.0, weights_version=1)
    assert result.failures == [] and result.task_indices == list(range(6))
    assert [t.task_type for t in result.trajectories] == list(HOUSEHOLD_TASK_TYPES)
    assert {t.weights_version for t in result.trajectories} == {1} and result.weights_version == 1
    assert result.generated_tokens == sum(len(t.sampler_logprobs) for t in result.trajectories)

    weights = student_weights(zoo)
    pool.publish_weights(ray.put(weights), 2)
    assert pool.workers_versions() == {"rollout-worker-0": 2, "rollout-worker-1": 2}
    with pytest.raises(ConflictError, match="version 2 but the request is for version 1"):
        pool.play(TASKS, h_roll=2, temperature=1.0, weights_version=1)
    worker = ray.get_actor("rollout-worker-0", namespace="turnopd")
    stale = RolloutRequest(tasks=TASKS[:1], h_roll=1, temperature=1.0, weights_version=1)
    with pytest.raises(ConflictError, match="holds weights version 2"):
        ray.get(worker.play.remote(stale))
    with pytest.raises(ConflictError, match="must increase"):
        pool.publish_weights(ray.put(weights), 2)

    again = pool.play(TASKS, h_roll=2, temperature=1.0, weights_version=2)
    assert {t.weights_version for t in again.trajectories} == {2}
    # The same weights under a new version sample exactly as before: seeds follow the tasks.
    assert [t.token_ids for t in again.trajectories] == [t.token_ids for t in result.trajectories]


def test_a_worker_killed_mid_play_is_restarted_reloaded_and_its_episodes_replayed(pool, gateway):
    assert pool.weights_version == 2  # published by the previous test
    undisturbed = pool.play(TASKS, h_roll=12, temperature=1.0, weights_version=2, max_new_tokens=48)
    assert undisturbed.failures == []
    deaths, reloads = pool.stats.worker_deaths, pool.stats.weight_reloads

    def kill_when_playing() -> None:
        deadline = time.monotonic() + 60
        while active_episodes(gateway) < len(TASKS) and time.monotonic() < deadline:
            time.sleep(0.02)
        # Both workers have opened their episodes and close them only at their end: they are
        # mid-play now. (A further wait of a quarter of the undisturbed play let the faster
        # engine finish worker 1's chunk first: the kill then landed on an idle worker.)
        ray.kill(ray.get_actor("rollout-worker-1", namespace="turnopd"), no_restart=False)

    killer = threading.Thread(target=kill_when_playing)
    killer.start()
    result = pool.play(TASKS, h_roll=12, temperature=1.0, weights_version=2, max_new_tokens=48)
    killer.join()
    assert pool.stats.worker_deaths == deaths + 1
    assert pool.stats.weight_reloads == reloads + 1  # the restarted worker came back at version 0
    assert result.failures == [] and result.task_indices == list(range(6))
    assert {t.weights_version for t in result.trajectories} == {2}
    assert [t.token_ids for t in result.trajectories] == [t.token_ids for t in undisturbed.trajectories]
    assert pool.workers_versions() == {"rollout-worker-0": 2, "rollout-worker-1": 2}


def test_chunks_that_could_not_reach_a_dead_gateway_are_played_again_on_the_one_switched_in(pool, gateway):
    undisturbed = pool.play(TASKS, h_roll=12, temperature=1.0, weights_version=2, max_new_tokens=48)
    replays = pool.stats.env_lost_replays + pool.stats.env_replays
    with socket.socket() as free:  # an address nothing listens on: the gateway's process is gone
        free.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{free.getsockname()[1]}"
    pool.switch_env_gateway(dead)
    # as the watchdog does once the new gateway answers
    switch = threading.Timer(1.0, pool.switch_env_gateway, args=(gateway.url,))
    switch.start()
    result = pool.play(TASKS, h_roll=12, temperature=1.0, weights_version=2, max_new_tokens=48)
    switch.join()
    assert pool.stats.env_lost_replays + pool.stats.env_replays > replays  # chunks came back env_unreachable
    assert result.failures == [] and result.task_indices == list(range(6))
    assert [t.token_ids for t in result.trajectories] == [t.token_ids for t in undisturbed.trajectories]


def test_a_worker_restarted_while_idle_is_counted_at_the_next_publish(pool, zoo):
    assert pool.weights_version == 2  # published by an earlier test
    crashes = dict(pool.stats.crashes_by_worker)
    kill_idle("rollout-worker-0")
    pool.publish_weights(ray.put(student_weights(zoo)), 3)
    assert pool.stats.crashes_by_worker[0] == crashes.get(0, 0) + 1
    assert pool.stats.crashes_by_worker[1] == crashes.get(1, 0)
    assert pool.workers_versions() == {"rollout-worker-0": 3, "rollout-worker-1": 3}


class HoldFirstConnection:
    """A loopback TCP proxy to ``target`` that takes its first connection and never answers it (a
    gateway call that hangs, its worker alive), and relays every later one."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").rsplit(":", 1)
        self.target = (host, int(port))
        self.held = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.held == 0:
            self.held += 1
            while await reader.read(65536):  # read the request, answer nothing, until it hangs up
                pass
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(*self.target)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def test_a_worker_hung_in_a_chunk_past_its_deadline_is_killed_restarted_and_its_chunk_replayed(pool, gateway):
    """A chunk in flight longer than rollout_worker.chunk_timeout_s: its worker is alive but stuck
    in an env call that never returns (the gateway's connection held open, unanswered). The pool
    kills it, Ray restarts it, the chunk is played again, and the result is the undisturbed one."""
    version = pool.weights_version
    undisturbed = pool.play(TASKS, h_roll=3, temperature=1.0, weights_version=version, max_new_tokens=16)
    assert undisturbed.failures == []
    kills, deaths = pool.stats.overdue_kills, pool.stats.worker_deaths
    own = pool.own
    pool.retune(
        own.model_copy(
            update={"rollout_worker": own.rollout_worker.model_copy(update={"chunk_timeout_s": 8.0})}
        )
    )
    proxy = HoldFirstConnection(gateway.url)
    pool.switch_env_gateway(proxy.url)
    try:
        result = pool.play(TASKS, h_roll=3, temperature=1.0, weights_version=version, max_new_tokens=16)
    finally:
        pool.retune(own)
        pool.switch_env_gateway(gateway.url)
        proxy.close()
    assert proxy.held == 1
    assert pool.stats.overdue_kills == kills + 1 and pool.stats.worker_deaths == deaths + 1
    assert result.failures == [] and result.task_indices == list(range(6))
    assert [t.token_ids for t in result.trajectories] == [t.token_ids for t in undisturbed.trajectories]
    assert set(pool.workers_versions().values()) == {version}


@ray.remote(num_cpus=0)
class WeightsOwner:
    """Owns the weights it puts, as the learner's rank 0 owns the weights it publishes."""

    def put(self, weights: dict) -> list:
        return [ray.put(weights)]  # in a list: the caller gets the reference, not the weights


def test_a_publish_of_weights_whose_owner_died_fails_and_keeps_every_worker(pool, zoo):
    """A learner killed as it publishes: its weights' owner is gone before a worker fetched them.
    The publish raises, every worker stays in the pool at the version it held, and the next publish
    (the run's rewind to its checkpoint) brings them all to it."""
    held = pool.weights_version
    weights = student_weights(zoo)
    owner = WeightsOwner.remote()  # type: ignore[attr-defined]
    (orphan,) = ray.get(owner.put.remote(weights))
    ray.kill(owner, no_restart=True)
    time.sleep(1.0)  # the owner's death reaches the object directory
    with pytest.raises(Exception, match="owner"):
        pool.publish_weights(orphan, held + 1)
    assert pool.live_workers == ["rollout-worker-0", "rollout-worker-1"]
    assert set(pool.workers_versions().values()) == {held}
    pool.publish_weights(ray.put(weights), held, rewind=True)
    result = pool.play(TASKS, h_roll=1, temperature=1.0, weights_version=held, max_new_tokens=16)
    assert result.failures == [] and result.task_indices == list(range(6))
    assert set(pool.workers_versions().values()) == {held}


def gateway_health(gateway: LocalGateway) -> dict:
    return httpx.get(f"{gateway.url}/healthz", timeout=5.0).json()


class FirstActionEngine(ScriptedEngine):
    """Answers every prompt with a tool call of the first action the prompt's last list of admissible
    actions names (the zoo's random student never makes one, so it never steps a game), after
    ``before_turn(turn)``."""

    def __init__(self, chat: ChatFormat, before_turn: Callable[[int], None] = lambda turn: None) -> None:
        super().__init__(chat.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        self.chat, self.before_turn, self.turns = chat, before_turn, 0

    def generate(self, prompts: Sequence[Sequence[int]], params: GenerationParams) -> list[Generation]:
        self.before_turn(self.turns)
        self.turns += 1
        out = []
        for prompt in prompts:
            listed = self.chat.tokenizer.decode(list(prompt)).rsplit("Admissible actions: ", 1)[1]
            action = re.split(r"[,.<\n]", listed, maxsplit=1)[0].strip()
            ids = [*self.chat.tokenizer.encode(format_response(action), add_special_tokens=False), self._end]
            out.append(Generation(ids, [0.0] * len(ids), "stop"))
        return out


def test_an_env_worker_killed_mid_play_loses_its_running_episodes_as_env_lost(gateway, zoo):
    """The gateway's one env worker process is SIGKILLed between two turns: the gateway replaces it,
    every episode still running answers its next step with 410, and the agent loop reports each as
    ``env_lost``, the reason the pool plays a chunk again for (with its seeds: the replay below)."""
    chat = ChatFormat(load_tokenizer("student", zoo))
    before = gateway_health(gateway)
    (env_worker,) = before["worker_pids"]

    def kill_before_turn_2(turn: int) -> None:
        if turn == 2:
            os.kill(env_worker, signal.SIGKILL)

    async def go(engine: GenerationEngine) -> tuple[list[Trajectory], list[EpisodeFailure]]:
        async with EnvGatewayClient(gateway.url) as env:
            return await play_episodes(engine, chat, env, TASKS, 4, 1.0, 48, seed=5)

    undisturbed, none = asyncio.run(go(FirstActionEngine(chat)))
    assert none == [] and all(turn.accepted for t in undisturbed for turn in t.turns)
    running = [i for i, t in enumerate(undisturbed) if len(t.turns) > 2]
    assert running  # else the kill would lose nothing
    trajectories, failures = asyncio.run(go(FirstActionEngine(chat, kill_before_turn_2)))
    assert [f.task for f in failures] == [TASKS[i] for i in running]
    assert {f.reason for f in failures} == {"env_lost"}
    assert all("step at turn 2: EpisodeLostError" in f.error for f in failures)
    finished = [t for t in undisturbed if len(t.turns) <= 2]  # won before the kill: nothing lost
    assert [t.token_ids for t in trajectories] == [t.token_ids for t in finished]
    after = gateway_health(gateway)
    assert after["worker_restarts"] == before["worker_restarts"] + 1 and after["worker_pids"] != [env_worker]
    # every episode deleted, the lost ones too (earlier tests' killed workers may have left theirs)
    assert after["active_episodes"] <= before["active_episodes"]

    # what the pool does with them: the same tasks and seed again give the undisturbed play
    again, none = asyncio.run(go(FirstActionEngine(chat)))
    assert none == [] and [t.token_ids for t in again] == [t.token_ids for t in undisturbed]
