"""Redis behind the run's records: the real `controller` actor on a real redis-server rebuilds what
Redis lost (``appendfsync everysec`` may drop its last writes) from the run's controller.jsonl and its
own state, on a resume and mid-run, and says so in its health."""

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
import redis

from services.contracts.controller import ProbeStats, StepDecision
from services.controller.actor import start_controller, stop_controller
from services.controller.embedded_redis import EmbeddedRedis
from services.controller.replay import replay
from services.controller.store import key_prefix
from services.operations.controller_client import ControllerClient
from services.operations.controller_rebuilds import RebuildNotices
from services.run_dir import DECISIONS_FILE, RunDir
from services.settings import TurnOPDSettings, load_settings

pytestmark = pytest.mark.integration
ENVS = ("alfworld", "search")
RUN = "run-rebuild"


def run_settings() -> TurnOPDSettings:
    """Two task sources, each with its own controller (probes at steps 1, 2, 4, 6, 8)."""
    return load_settings(
        None,
        {
            "optim": {"steps": 8},
            "depth": {"min": 2, "max": 8, "probe_interval": 2, "warmup_steps": 2, "min_cov_traj": 1},
            "sources": [
                {"env": "alfworld", "share": 0.5, "teacher": "teacher"},
                {"env": "search", "share": 0.5, "teacher": "teacher-search", "max_turns": 6},
            ],
        },
    )


def stats(k: int, env: str) -> ProbeStats:
    shift = 0.1 if env == "search" else 0.0  # each source's KL mass moves its own way
    kl = [1.0, 0.8 / k + shift, 0.6 / k, 0.4 / k, 0.2 / k]
    return ProbeStats(step=k, kl_per_turn=kl, survivors=[8, 8, 6, 4, 2], success_turns=[3, 4, 4, 4])


class Driver:
    """The driver's side of the steps: plan and ingest each source's controller, then log the
    decisions to controller.jsonl as ``pipeline.train`` does."""

    def __init__(self, run_dir: Path, redis_url: str) -> None:
        self.log = run_dir / DECISIONS_FILE
        self.url = redis_url
        self.actor = self.start()

    def start(self) -> Any:
        return start_controller(run_settings().for_controllers(), False, RUN, self.url, self.log.resolve())

    def steps(self, first: int, last: int) -> None:
        for k in range(first, last + 1):
            for env in ENVS:
                plan = ray.get(self.actor.plan.remote(k, 0, env))
                decision = ray.get(self.actor.ingest.remote(k, stats(k, env) if plan.probe else None, 0, env))
                with self.log.open("a") as fh:
                    fh.write(decision.model_copy(update={"env": env}).model_dump_json() + "\n")

    def decisions(self, env: str) -> list[StepDecision]:
        return ray.get(self.actor.decisions.remote(env))


def expected(env: str) -> list[StepDecision]:
    """What the controller of ``env`` decides over the whole run, replayed from its probe statistics."""
    depth = run_settings().for_controller(env).depth
    return list(replay({k: stats(k, env) for k in (1, 2, 4, 6, 8)}, 8, depth))


def lose_last_write(client: redis.Redis, env: str, state_before: str) -> None:
    """What a crash under ``appendfsync everysec`` leaves: the state and decision of the last step gone."""
    prefix = key_prefix(RUN, env)
    client.set(prefix + "state", state_before)
    client.rpop(prefix + "decisions")


def lose_everything(client: redis.Redis, env: str) -> None:
    prefix = key_prefix(RUN, env)
    client.delete(prefix + "state", prefix + "decisions", prefix + "probes")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    embedded = EmbeddedRedis(tmp_path / "redis")
    embedded.start()
    yield embedded
    embedded.stop()


def test_a_resume_rewinds_to_its_checkpoint_after_redis_lost_its_last_writes(ray_session, server, tmp_path):
    driver = Driver(tmp_path, server.url)
    client = redis.Redis.from_url(server.url, decode_responses=True)
    try:
        driver.steps(1, 4)
        before = client.get(key_prefix(RUN, "alfworld") + "state")
        driver.steps(5, 5)
        # the run dies; Redis comes back without step 5 of one source and without anything of the other
        stop_controller(driver.actor)
        lose_last_write(client, "alfworld", before)
        lose_everything(client, "search")
        server.restart()

        driver.actor = driver.start()  # `turnopd train --resume`: the checkpoint is step 4's
        RunDir(tmp_path).truncate_after(4)
        for env in ENVS:
            assert ray.get(driver.actor.rewind.remote(4, env)).depth.step == 4
        health = ray.get(driver.actor.health.remote())
        assert health.rebuilt_steps == 1 + 5
        assert "search controller's steps 1..5 (it held step 0)" in health.rebuilt
        driver.steps(5, 8)
        for env in ENVS:
            assert driver.decisions(env) == expected(env)
    finally:
        stop_controller(driver.actor)


def test_the_run_goes_on_after_a_redis_restart_that_lost_the_last_write(
    ray_session, server, tmp_path, caplog
):
    driver = Driver(tmp_path, server.url)
    client = redis.Redis.from_url(server.url, decode_responses=True)
    notices = RebuildNotices(ControllerClient(driver.actor))  # the driver's console
    try:
        driver.steps(1, 3)
        notices.check()
        before = client.get(key_prefix(RUN, "alfworld") + "state")
        driver.steps(4, 4)
        lose_last_write(client, "alfworld", before)
        lose_everything(client, "search")
        server.restart()  # the live controller still holds step 4

        driver.steps(5, 5)  # the next save finds Redis behind: rebuilt, then saved
        with caplog.at_level(logging.WARNING):
            notices.check()
            notices.check()  # once per rebuild
        warnings = [r.getMessage() for r in caplog.records if r.name.endswith("controller_rebuilds")]
        assert len(warnings) == 1 and "search controller's steps 1..4" in warnings[0]
        assert warnings[0].endswith("(5 step(s) rebuilt so far)")
        driver.steps(6, 8)
        for env in ENVS:
            assert driver.decisions(env) == expected(env)
        health = ray.get(driver.actor.health.remote())
        assert health.rebuilt_steps == 1 + 4 and health.redis_ok
        assert "search controller's steps 1..4 (it held step 0)" in health.rebuilt
    finally:
        stop_controller(driver.actor)
