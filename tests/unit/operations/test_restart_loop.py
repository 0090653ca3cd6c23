"""The restart loop's watchdog (no Ray): an embedded redis-server or a local env gateway process that
exited is filed once as a restart, the way `turnopd restart` files one; a live one, or one the run
does not own, never is."""

from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from services.operations.env_gateway_ops import EnvGatewayOps
from services.operations.managed_service import RunContext
from services.operations.redis_ops import RedisOps
from services.operations.restart_loop import RestartLoop
from services.run_dir import RunDir
from services.settings import TurnOPDSettings


class Process:
    def __init__(self) -> None:
        self.running = True


def watched_loop() -> tuple[RestartLoop, RedisOps, EnvGatewayOps]:
    ctx = RunContext(settings=TurnOPDSettings(), run=RunDir(Path("unused")), run_id="r")
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
