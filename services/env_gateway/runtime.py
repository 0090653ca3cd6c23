"""Everything one gateway replica runs: the worker pool, the episode service, the metrics, and
the task that expires idle episodes. It serves the routes' `EpisodeAPI` directly."""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from services.contracts.env_gateway import EnvCatalog, EpisodeCreate, EpisodeStart, Health, StepResult
from services.env_gateway.episodes import EpisodeService
from services.env_gateway.metrics import GatewayMetrics
from services.env_gateway.worker_pool import WorkerPool
from services.settings.env_gateway import EnvGatewaySettings

log = logging.getLogger(__name__)


class GatewayRuntime:
    def __init__(self, settings: EnvGatewaySettings, service_token: str | None) -> None:
        """``service_token``: the gateway's own, handed to its env workers for their remote servers."""
        self.settings = settings
        self.metrics = GatewayMetrics()
        self.pool = WorkerPool(settings, service_token, on_restart=self.metrics.worker_restarts.inc)
        self.episodes = EpisodeService(settings, self.pool, self.metrics, service_token=service_token)
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.pool.start()
        self.metrics.workers_alive.set(self.pool.alive())
        self._sweeper = asyncio.create_task(self._sweep(), name="env-episode-ttl")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        await self.episodes.close_all()
        await self.pool.close()

    # EpisodeAPI

    async def create(self, request: EpisodeCreate) -> EpisodeStart:
        return await self.episodes.create(request)

    async def step(self, episode_id: str, action: str) -> StepResult:
        return await self.episodes.step(episode_id, action)

    async def delete(self, episode_id: str) -> None:
        await self.episodes.delete(episode_id)

    async def catalog(self) -> EnvCatalog:
        return self.episodes.catalog()

    async def health(self) -> Health:
        return self.episodes.health()

    async def metrics_text(self) -> bytes:
        self.episodes.health()  # refreshes the live-workers gauge
        return self.metrics.render()

    async def _sweep(self) -> None:
        interval = min(max(self.settings.episode_ttl_s / 4.0, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            expired = await self.episodes.expire_idle()
            if expired:
                log.info("closed %d idle episodes (ttl %.0fs)", expired, self.settings.episode_ttl_s)


@contextlib.asynccontextmanager
async def local_runtime(
    settings: EnvGatewaySettings, service_token: str | None
) -> AsyncIterator[GatewayRuntime]:
    """A started runtime for the duration of the block (the standalone server's lifespan)."""
    runtime = GatewayRuntime(settings, service_token)
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.stop()
