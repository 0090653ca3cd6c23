"""Operations on a playing rollout pool: a worker replaced mid-play, chunks moved to a new env gateway.

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
from services.loopback import free_loopback_port
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
    rollout_pool = RolloutPool(rollout_settings(config, zoo_cache_dir()), gateway.url, "student")
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
