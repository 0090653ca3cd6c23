"""Operations on a playing rollout pool: a worker replaced mid-play, chunks moved to a new env gateway,
the pool grown and shrunk.

Both must leave the result exactly as an undisturbed play: every task played, same trajectories
(the lost chunk is played again with the same seeds), the published weights version.
"""

import threading
import time

import httpx
import pytest
import ray
from rollout_fixtures import gateway_config, rollout_settings, zoo_cache_dir

from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES
from services.contracts.operations import WorkerHealth
from services.contracts.rollout import EpisodeTask
from services.env_gateway.local_server import LocalGateway
from services.errors import InputError, TurnOPDError
from services.loopback import free_loopback_port
from services.models.loading import load_causal_lm
from services.operations.restart_rules import start_or_restore
from services.rollout_worker.pool import RolloutPool

pytestmark = pytest.mark.integration

TASKS = [
    EpisodeTask(env="alfworld", split="valid_unseen", seed=i // 6, task_type=HOUSEHOLD_TASK_TYPES[i % 6])
    for i in range(6)
]
# long enough that a replacement 0.5 s after every episode opened lands mid-play
PLAY = {"h_roll": 24, "temperature": 1.0, "weights_version": 0, "max_new_tokens": 64}


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return gateway_config(tmp_path_factory.mktemp("ops"))


@pytest.fixture(scope="module")
def gateway(config):
    with LocalGateway(config, workers=1, startup_timeout_s=300) as server:
        yield server


@pytest.fixture(scope="module")
def pool(ray_session, config, gateway):
    # half a logical CPU each: the session's 2-CPU cluster has room for a third (the resize test)
    settings = rollout_settings(config, zoo_cache_dir(), cpus=0.5)
    rollout_pool = RolloutPool(
        settings.for_rollout_worker(), settings.cluster.rollout_workers, gateway.url, "student"
    )
    yield rollout_pool
    rollout_pool.close()


def active_episodes(url: str) -> int:
    return int(httpx.get(f"{url}/healthz", timeout=5.0).json()["active_episodes"])


def when_playing(url: str, action, *args) -> threading.Thread:
    """Run ``action(*args)`` on a thread once every task's episode is open on the gateway at ``url``."""

    def go() -> None:
        deadline = time.monotonic() + 120
        while active_episodes(url) < len(TASKS) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)
        action(*args)

    thread = threading.Thread(target=go)
    thread.start()
    return thread


def test_replacing_a_worker_mid_play_replays_its_chunk_on_the_new_actor(pool, gateway):
    undisturbed = pool.play(TASKS, **PLAY)
    assert undisturbed.failures == []
    old_pid = ray.get(ray.get_actor("rollout-worker-0", namespace="turnopd").health.remote()).pid
    deaths, replays = pool.stats.worker_deaths, pool.stats.replays

    replacer = when_playing(gateway.url, pool.replace_worker, 0)
    result = pool.play(TASKS, **PLAY)
    replacer.join()

    assert result.failures == [] and result.task_indices == list(range(len(TASKS)))
    assert [t.token_ids for t in result.trajectories] == [t.token_ids for t in undisturbed.trajectories]
    assert pool.stats.replacements_by_worker[0] == 1 and pool.stats.worker_deaths == deaths  # not a crash
    assert pool.stats.replays == replays + 1
    health: WorkerHealth = ray.get(ray.get_actor("rollout-worker-0", namespace="turnopd").health.remote())
    assert health.pid != old_pid and health.weights_version == 0 and not health.playing


def test_a_replacement_that_cannot_start_leaves_a_worker_with_the_old_settings(pool, gateway):
    """Issue 38: a new worker asking for more CPUs than the cluster has stays pending; it is killed, so
    the retry with the old settings can take the name back (it used to time out after 60 s)."""
    old = pool.worker_settings(0)
    greedy = old.model_copy(
        update={
            "rollout_worker": old.rollout_worker.model_copy(
                update={"num_cpus": 64.0, "restart_timeout_s": 5.0}
            )
        }
    )
    t0 = time.monotonic()
    with pytest.raises(TurnOPDError, match="rollout-worker-0 was not ready within 5 s"):
        start_or_restore(lambda settings: pool.replace_worker(0, settings), greedy, old)
    assert time.monotonic() - t0 < 60  # no wait for a name the pending actor kept
    assert pool.worker_settings(0) == old and pool.live_workers == ["rollout-worker-0", "rollout-worker-1"]
    played = pool.play(TASKS, **PLAY)
    assert played.failures == [] and played.task_indices == list(range(len(TASKS)))


def test_a_shrink_during_a_crashed_workers_recovery_loses_no_task(pool, gateway):
    """Issue 38: worker 1 crashes mid-play; while the pool waits for Ray to restart it, an operator shrinks
    the pool to one worker. The recovery used to read the deleted index (IndexError); now it gives the
    worker up and its chunk is played again on worker 0."""
    crashed = ray.get_actor("rollout-worker-1", namespace="turnopd")

    def crash_then_shrink() -> None:
        ray.kill(crashed, no_restart=False)  # a crash: Ray restarts it (its model load takes seconds)
        time.sleep(0.3)
        pool.resize(1, pool.own)

    shrinker = when_playing(gateway.url, crash_then_shrink)
    result = pool.play(TASKS, **PLAY)
    shrinker.join()
    assert result.failures == [] and result.task_indices == list(range(len(TASKS)))
    assert pool.size == 1 and pool.live_workers == ["rollout-worker-0"]
    assert [i for i, _, live in pool.members()] == [0]
    assert pool.resize(2, pool.own) == 1 and pool.live_workers == [
        "rollout-worker-0",
        "rollout-worker-1",
    ]


def test_chunks_that_lose_their_gateway_are_played_again_on_the_new_one(pool, config):
    """The gateway the chunks started on is gone (nothing listens at its address any more); while
    their connects are still being retried, the pool is pointed at a new gateway."""
    undisturbed = pool.play(TASKS, **PLAY)
    pool.switch_env_gateway(f"http://127.0.0.1:{free_loopback_port()}")
    with LocalGateway(config, workers=1, startup_timeout_s=300) as fresh:
        switcher = threading.Timer(
            1.0, pool.switch_env_gateway, args=(fresh.url,)
        )  # inside the ~6 s of retries
        switcher.start()
        result = pool.play(TASKS, **PLAY)
        switcher.join()
        assert pool.env_gateway_url == fresh.url
        assert pool.stats.env_replays == 2  # both chunks lost every episode, then were played again
        assert result.failures == [] and result.task_indices == list(range(len(TASKS)))
        assert [t.token_ids for t in result.trajectories] == [t.token_ids for t in undisturbed.trajectories]
        assert active_episodes(fresh.url) == 0


def test_the_pool_grows_with_the_published_weights_and_shrinks_after_draining(pool, gateway):
    """Last in this module: the pool ends with its two workers, at weights version 1."""
    pool.switch_env_gateway(gateway.url)  # the test above left it on a gateway that has stopped
    weights = load_causal_lm("student", cache_dir=zoo_cache_dir()).state_dict()
    weights.pop("lm_head.weight", None)
    pool.publish_weights(ray.put(weights), 1)
    played = {**PLAY, "weights_version": 1}

    assert pool.resize(3, pool.own) == 2 and pool.size == 3
    assert pool.workers_versions() == {f"rollout-worker-{i}": 1 for i in range(3)}  # before it plays
    three = pool.play(TASKS, **played)
    assert three.failures == [] and three.task_indices == list(range(len(TASKS)))

    # taken away mid-play: worker 2 finishes its chunk first, so nothing is replayed or lost and the
    # result is exactly the three-worker play (chunk seeds follow the chunks, not the workers)
    replays, deaths = pool.stats.replays, pool.stats.worker_deaths
    shrinker = when_playing(gateway.url, pool.resize, 2, pool.own)
    drained = pool.play(TASKS, **played)
    shrinker.join()
    assert pool.size == 2 and pool.live_workers == ["rollout-worker-0", "rollout-worker-1"]
    assert drained.failures == [] and pool.stats.replays == replays and pool.stats.worker_deaths == deaths
    assert [t.token_ids for t in drained.trajectories] == [t.token_ids for t in three.trajectories]
    with pytest.raises(ValueError):
        ray.get_actor("rollout-worker-2", namespace="turnopd")

    with pytest.raises(InputError, match="at least 1 worker, not 0"):
        pool.resize(0, pool.own)
    with pytest.raises(InputError, match=r"38 more rollout worker\(s\) need CPU 0.5 each; .* short of CPU"):
        pool.resize(40, pool.own)
    assert pool.size == 2 and pool.workers_versions() == {"rollout-worker-0": 1, "rollout-worker-1": 1}
