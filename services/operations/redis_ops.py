"""`redis`: the controller's state store, behind the lifecycle interface (``ManagedService``)."""

from services.contracts.operations import ServiceStatus
from services.controller.embedded_redis import EmbeddedRedis
from services.errors import ConflictError
from services.operations.managed_service import Change, ManagedService
from services.operations.run_pieces import RunPieces
from services.settings.per_service import RedisServiceSettings


def masked_url(url: str) -> str:
    """A Redis URL without its password."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    return f"{scheme}{sep}***@{rest.rsplit('@', 1)[1]}"


class RedisOps(ManagedService[RedisServiceSettings]):
    """The controller's state store: an external Redis (``[controller] redis_url`` / ``REDIS_URL``)
    or an embedded redis-server in the run directory (a non-loopback URL needs a password)."""

    kind = "redis"
    url: str
    server: EmbeddedRedis | None = None  # None: an external Redis this run does not own

    def compose(self, run: RunPieces) -> RedisServiceSettings:
        return run.redis

    def start(self) -> None:
        controller = self.settings.controller
        url = controller.resolved_redis_url()
        if url:
            self.url = url
            return
        password = controller.redis_password
        self.server = EmbeddedRedis(
            controller.embedded_redis_dir or self.ctx.run.redis_dir,
            password=password.get_secret_value() if password else None,
        )
        self.url = self.server.start(controller.redis_start_timeout_s)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def replace(self, change: Change, step: int) -> str:
        """The embedded server only: stopped and started again on the same port and append-only file."""
        server = self.server
        if server is None:
            raise ConflictError(
                "Redis is external to this run ([controller] redis_url or REDIS_URL); restart it where it runs"
            )
        new = self.restarted(change) or self.settings
        server.restart(new.controller.redis_start_timeout_s)
        self.settings = new
        self.counts[self.kind] += 1
        return f"redis-server restarted on port {server.port} from its append-only file"

    @property
    def lost(self) -> bool:
        """The embedded redis-server this run started has exited (killed, OOM): the watchdog restarts it."""
        return self.server is not None and not self.server.running

    def status(self, step: int) -> list[ServiceStatus]:
        embedded = self.server is not None
        return [
            ServiceStatus(
                name="redis",
                health="down" if self.lost else "ok",
                restarts=self.counts[self.kind],
                version="append-only file" if embedded else "external",
                address=masked_url(self.url),
                detail="embedded redis-server" if embedded else "external",
            )
        ]
