"""The controller service against a real redis-server and a real local Ray cluster."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray
import redis
from controller_inputs import small_run_settings, stats_for

from services.contracts.controller_state import ControllerState
from services.controller.actor import ControllerService, start_controller
from services.controller.embedded_redis import EmbeddedRedis, redis_serving
from services.controller.replay import replay
from services.controller.schedule import initial_controller_state
from services.controller.store import RedisStateStore
from services.errors import ConflictError
from services.ray_names import CONTROLLER_ACTOR as ACTOR_NAME
from services.ray_names import NAMESPACE
from services.settings import load_settings

pytestmark = pytest.mark.integration


@pytest.fixture
def redis_server(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


def small_settings(steps=12):
    """The controller's own settings, composed from the run's as the stack does."""
    return small_run_settings(steps).for_controller()


def drive(service_plan, service_ingest, start, stop):
    for k in range(start, stop + 1):
        plan = service_plan(k)
        service_ingest(k, stats_for(k) if plan.probe else None)


def test_state_survives_a_redis_crash_and_restart(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis")
    url = server.start()
    settings = small_settings()
    service = ControllerService(settings, "run-a", RedisStateStore(url, "run-a"))
    drive(service.plan, service.ingest, 1, 5)
    before = service.snapshot()
    server.stop(kill=True)  # SIGKILL: only what was fsync'ed to the AOF survives
    again = EmbeddedRedis(tmp_path / "redis", port=server.port)
    again.start()
    try:
        reloaded = ControllerService(settings, "run-a", RedisStateStore(again.url, "run-a"))
        assert reloaded.snapshot() == before
        assert [d.step for d in reloaded.decisions()] == [1, 2, 3, 4, 5]
    finally:
        again.stop()


def test_a_live_store_reconnects_across_a_redis_restart(tmp_path):
    """`turnopd restart redis` under a live controller: the same store object goes on writing."""
    server = EmbeddedRedis(tmp_path / "redis")
    url = server.start()
    settings = small_settings()
    service = ControllerService(settings, "run-e", RedisStateStore(url, "run-e"))
    try:
        drive(service.plan, service.ingest, 1, 4)
        assert server.restart(kill=True) == url  # same port, same append-only file
        drive(service.plan, service.ingest, 5, 8)
        assert service.health().redis_ok
        assert [d.step for d in service.decisions()] == list(range(1, 9))
        reloaded = ControllerService(settings, "run-e", RedisStateStore(url, "run-e"))
        assert reloaded.snapshot() == service.snapshot()
    finally:
        server.stop()


def test_store_refuses_stale_writers(redis_server):
    settings = small_settings()
    store = RedisStateStore(redis_server.url, "run-b")
    first = ControllerService(settings, "run-b", store)
    stale = ControllerService(settings, "run-b", RedisStateStore(redis_server.url, "run-b"))
    first.ingest(1, stats_for(1))
    with pytest.raises(ConflictError, match="cannot write step 1"):
        stale.ingest(1, stats_for(1))
    assert isinstance(store.load(), ControllerState) and store.load().depth.step == 1


def test_run_identity_is_checked(redis_server):
    settings = small_settings()
    ControllerService(settings, "run-c", RedisStateStore(redis_server.url, "run-c"))
    other = small_settings(steps=99)
    with pytest.raises(ConflictError, match="was started as"):
        ControllerService(other, "run-c", RedisStateStore(redis_server.url, "run-c"))
    assert initial_controller_state("x", "vanilla", settings).depth.h_bar == 12.0


def test_killed_controller_actor_resumes_from_redis(ray_session, redis_server):
    run_settings = small_run_settings()
    settings = run_settings.for_controller()
    actor = start_controller(run_settings.for_controllers(), False, "run-d", redis_server.url)
    try:
        drive(lambda k: ray.get(actor.plan.remote(k)), lambda k, s: ray.get(actor.ingest.remote(k, s)), 1, 6)
        h_bar = ray.get(actor.snapshot.remote()).depth.h_bar
        ray.kill(actor, no_restart=False)  # crash: Ray restarts it, __init__ reloads from Redis
        deadline = time.monotonic() + 60
        while True:
            try:
                restarted = ray.get(actor.snapshot.remote(), timeout=10)
                break
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                assert time.monotonic() < deadline, "controller actor did not come back"
                time.sleep(0.5)
        assert restarted.depth.h_bar == h_bar and restarted.depth.step == 6
        same = ray.get_actor(ACTOR_NAME, namespace=NAMESPACE)
        drive(lambda k: ray.get(same.plan.remote(k)), lambda k, s: ray.get(same.ingest.remote(k, s)), 7, 12)
        decisions = ray.get(same.decisions.remote())
        probes = ray.get(same.probes.remote())
        assert [d.step for d in decisions] == list(range(1, 13))
        # live decisions equal an independent replay of the paper's algorithm on the run's own probes
        assert decisions == list(replay(probes, 12, settings.depth))
    finally:
        ray.kill(actor, no_restart=True)


def test_rewind_forgets_later_steps(redis_server):
    settings = small_settings()
    service = ControllerService(settings, "run-e", RedisStateStore(redis_server.url, "run-e"))
    drive(service.plan, service.ingest, 1, 7)
    decisions = service.decisions()
    state = service.rewind(4)
    assert state.depth.step == 4 and state.depth.h_bar == decisions[3].h_bar
    assert [d.step for d in service.decisions()] == [1, 2, 3, 4]
    assert max(service.probes()) <= 4
    again = ControllerService(settings, "run-e", RedisStateStore(redis_server.url, "run-e"))
    assert again.snapshot() == state
    drive(again.plan, again.ingest, 5, 7)
    assert again.decisions() == decisions  # replaying the same probes reproduces the same steps
    assert service.rewind(0).depth.step == 0 and service.decisions() == []


def test_each_environment_keeps_its_own_controller_state(redis_server):
    import redis

    run = small_run_settings().model_copy(
        update={
            "sources": load_settings(
                None,
                {
                    "sources": [
                        {"env": "alfworld", "share": 0.5, "teacher": "t", "depth": {"max": 12}},
                        {"env": "search", "share": 0.5, "teacher": "u", "depth": {"max": 6}},
                    ]
                },
            ).sources
        }
    )
    url = redis_server.url
    household = ControllerService(
        run.for_controller("alfworld"), "run-m", RedisStateStore(url, "run-m", "alfworld")
    )
    search = ControllerService(run.for_controller("search"), "run-m", RedisStateStore(url, "run-m", "search"))
    drive(household.plan, household.ingest, 1, 2)
    drive(search.plan, search.ingest, 1, 4)
    assert (household.snapshot().depth.step, search.snapshot().depth.step) == (2, 4)
    assert max(d.h_hat for d in search.decisions()) <= 6  # its own H_max
    keys = set(redis.Redis.from_url(url, decode_responses=True).keys("turnopd:run-m:*"))
    assert {"turnopd:run-m:controller:alfworld:state", "turnopd:run-m:controller:search:state"} <= keys
    again = ControllerService(run.for_controller("search"), "run-m", RedisStateStore(url, "run-m", "search"))
    assert again.snapshot() == search.snapshot()  # reloaded from its own keys


ORPHANING_DRIVER = """
import sys, time
from pathlib import Path
from services.controller.embedded_redis import EmbeddedRedis
server = EmbeddedRedis(Path(sys.argv[1]))
print(server.start(), server.pid, flush=True)
time.sleep(600)
"""


def test_a_redis_server_left_by_a_killed_driver_is_stopped_by_the_next_start(tmp_path):
    """A SIGKILLed driver leaves its redis-server running on the run's append-only file; the
    resumed run's start stops it and serves the same data from a server of its own."""
    data = (tmp_path / "redis").resolve()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    driver = subprocess.Popen(
        [sys.executable, "-c", ORPHANING_DRIVER, str(data)], stdout=subprocess.PIPE, text=True, env=env
    )
    url, pid = driver.stdout.readline().split()
    redis.Redis.from_url(url).set("turnopd:probe", "kept")
    driver.kill()
    driver.wait(timeout=30)
    assert redis_serving(int(pid), data)  # the orphan lives on, holding the append-only file
    again = EmbeddedRedis(data)
    again.start()
    try:
        assert not redis_serving(int(pid), data)
        assert redis.Redis.from_url(again.url).get("turnopd:probe") == b"kept"
    finally:
        again.stop()
