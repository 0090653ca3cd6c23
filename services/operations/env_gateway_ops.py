"""`env-gateway`: the env gateway this run plays against, behind the lifecycle interface (``ManagedService``)."""

from collections import Counter
from collections.abc import Callable

from services.contracts.operations import ServiceStatus
from services.env_gateway.local_server import LocalGateway
from services.errors import ConflictError
from services.operations.managed_service import Change, ManagedService, RunContext
from services.operations.run_pieces import RunPieces
from services.settings.per_service import EnvGatewayServiceSettings


class EnvGatewayOps(ManagedService[EnvGatewayServiceSettings]):
    """The env gateway: external (``[env_gateway] url`` / ``TURNOPD_ENV_GATEWAY_URL``), else a local
    gateway process on ``[env_gateway] port`` (0: any free port). Whoever plays against it follows
    its replacements (``on_switch``)."""

    kind = "env-gateway"
    url: str
    gateway: LocalGateway | None = None  # None: an external gateway this run does not own

    def __init__(self, ctx: RunContext, counts: Counter[str]) -> None:
        super().__init__(ctx, counts)
        self._followers: list[Callable[[str], None]] = []

    def compose(self, run: RunPieces) -> EnvGatewayServiceSettings:
        return run.env_gateway

    def on_switch(self, follow: Callable[[str], None]) -> None:
        """``follow(url)`` is told the new gateway's URL before the old one stops."""
        self._followers.append(follow)

    def start(self) -> None:
        url = self.settings.env_gateway.resolved_url()
        if url is not None:
            self.url = url
            return
        log_path = self.ctx.run.path("env_gateway.log")
        port = self.settings.env_gateway.port
        self.gateway = LocalGateway(settings=self.settings, log_path=log_path, port=port)
        self.url = self.gateway.start().url

    def stop(self) -> None:
        if self.gateway is not None:
            self.gateway.stop()

    def replace(self, change: Change, step: int) -> str:
        """A new gateway process on a new port; the pool plays every later request against it, then
        the old one stops. It runs with the settings it has now, or with those a restart takes from
        a new config (``restarted``)."""
        old = self.gateway
        if old is None:
            raise ConflictError(
                f"the env gateway at {self.url} was not started by this run; restart it where it runs"
            )
        settings = self.restarted(change) or self.settings
        count = self.counts[self.kind] + 1
        log_path = self.ctx.run.path(f"env_gateway.{count}.log")
        fresh = LocalGateway(settings=settings, log_path=log_path).start()
        for follow in self._followers:
            follow(fresh.url)
        self.gateway, self.url = fresh, fresh.url
        old.stop()
        self.settings = settings
        self.counts[self.kind] += 1
        return f"env gateway replaced: {old.url} -> {fresh.url}"

    @property
    def lost(self) -> bool:
        """The gateway process this run started has exited: the watchdog replaces it."""
        return self.gateway is not None and not self.gateway.running

    def status(self, step: int) -> list[ServiceStatus]:
        return [
            ServiceStatus(
                name="env-gateway",
                health="down" if self.lost else "ok",
                restarts=self.counts[self.kind],
                version=f"config {self.version()}",
                address=self.url,
                detail="local process" if self.gateway is not None else "external",
            )
        ]
