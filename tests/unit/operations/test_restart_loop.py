"""The restart loop (no Ray): requests are messages taken on the loop, a learner's carried out only at a
step boundary; its watchdog files an embedded redis-server or a local env gateway process that
exited once as a restart, the way `turnopd restart` files one (a live one, or one the run does not
own, never)."""

import asyncio
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from services.contracts.operations import RestartRequest, RestartResult
from services.operations.env_gateway_ops import EnvGatewayOps
from services.operations.managed_service import RunContext
from services.operations.redis_ops import RedisOps
from services.operations.restart_loop import RestartLoop
from services.operations.run_pieces import RunPieces
from services.run_dir import RESTARTS_FILE, RunDir
from services.settings import TurnOPDSettings


class Process:
    def __init__(self) -> None:
        self.running = True


def watched_loop() -> tuple[RestartLoop, RedisOps, EnvGatewayOps]:
    ctx = RunContext(pieces=RunPieces.of(TurnOPDSettings()), run=RunDir(Path("unused")), run_id="r")
    redis, gateway = RedisOps(ctx, Counter()), EnvGatewayOps(ctx, Counter())
    redis.server, gateway.gateway = Process(), Process()  # type: ignore[assignment]
    redis.url, gateway.url = "redis://127.0.0.1:6399/0", "http://127.0.0.1:8090"
    restarts = SimpleNamespace(services={"redis": redis, "env-gateway": gateway, "controller": object()})
    return RestartLoop(SimpleNamespace(control=None), restarts), redis, gateway  # type: ignore[arg-type]


def test_a_process_that_exited_is_filed_once_as_its_services_restart():
    loop, redis, gateway = watched_loop()
    assert [s.kind for s in loop.watched] == ["redis", "env-gateway"]
    loop._watch()
    assert loop._next() is None  # both alive: nothing filed
    redis.server.running = False  # type: ignore[union-attr]
    loop._watch()
    loop._watch()  # still dead, its restart not done yet: not filed twice
    request = loop._next()
    assert request is not None and (request.request_id, request.service) == ("watchdog-redis-1", "redis")
    assert loop._next() is None
    assert redis.status(0)[0].health == "down" and gateway.status(0)[0].health == "ok"
    gateway.gateway.running = False  # type: ignore[union-attr]
    loop._watch()
    request = loop._next()
    assert request is not None and request.request_id == "watchdog-env-gateway-2"


def test_a_store_or_gateway_the_run_does_not_own_is_never_restarted():
    loop, redis, gateway = watched_loop()
    redis.server, gateway.gateway = None, None  # external: REDIS_URL, TURNOPD_ENV_GATEWAY_URL
    loop._watch()
    assert loop._next() is None and not redis.lost and not gateway.lost


class Remote:
    """A `run-control` method as the loop calls it: ``.remote(...)``, awaited."""

    def __init__(self, fn):
        self.fn = fn

    def remote(self, *args):
        async def call():
            return self.fn(*args)

        return call()


class Control:
    def __init__(self) -> None:
        self.filed: list[RestartRequest] = []
        self.answers: list[RestartResult] = []
        self.take = Remote(self._take)
        self.complete = Remote(self.answers.append)
        self.close = Remote(self._take)

    def _take(self) -> list[RestartRequest]:
        filed, self.filed = self.filed, []
        return filed


class Restarts:
    def __init__(self) -> None:
        self.services: dict[str, object] = {}
        self.carried: list[tuple[str, int]] = []

    def run(self, request, step, on_start=lambda: None):
        on_start()
        self.carried.append((request.service, step))
        return RestartResult(
            request_id=request.request_id, service=request.service, ok=True, message="restarted",
            started_at=0.0, seconds=0.0, step=step,
        )  # fmt: skip


def test_requests_are_messages_a_learners_waits_for_the_boundary_and_the_end_answers_the_rest():
    control, restarts, logged, plans = Control(), Restarts(), [], []
    run = SimpleNamespace(append=lambda name, line: logged.append((name, json.loads(line)["request_id"])))
    live = SimpleNamespace(
        control=control, steps_done=2, publish=lambda: None, stack=SimpleNamespace(run=run)
    )
    loop = RestartLoop(live, restarts, poll_s=0.01, on_restarted=lambda: plans.append(len(logged)))  # type: ignore[arg-type]

    async def scenario() -> None:
        loop.start()
        control.filed += [request("w", "rollout-worker-0"), request("l", "learner")]
        for _ in range(500):  # the loop's task carries out the worker's on its own
            if control.answers:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert restarts.carried == [("rollout-worker-0", 2)]  # the learner's waits
        await loop.at_step_boundary(3)
        assert restarts.carried == [("rollout-worker-0", 2), ("learner", 3)]
        control.filed.append(request("late", "learner"))
        await loop.stop()

    asyncio.run(scenario())
    assert [(a.request_id, a.ok) for a in control.answers] == [("w", True), ("l", True), ("late", False)]
    assert control.answers[-1].message == "not done: the run finished first"
    assert logged == [(RESTARTS_FILE, "w"), (RESTARTS_FILE, "l"), (RESTARTS_FILE, "late")]
    assert plans == [1, 2]  # the plan file follows each restart that was done


def request(request_id: str, service: str) -> RestartRequest:
    return RestartRequest(request_id=request_id, service=service)
