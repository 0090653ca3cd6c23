"""Everything one gateway replica runs: the worker pool, the episode service, the metrics, and
the task that expires idle episodes. Started and stopped by the app's lifespan."""

import asyncio
import contextlib
import logging

from services.env_gateway.episodes import EpisodeService
from services.env_gateway.metrics import GatewayMetrics
from services.env_gateway.worker_pool import WorkerPool
from services.settings.env_gateway import EnvGatewaySettings

log = logging.getLogger(__name__)


class GatewayRuntime:
    def __init__(self, settings: EnvGatewaySettings) -> None:
        self.settings = settings
        self.metrics = GatewayMetrics()
        self.pool = WorkerPool(settings, on_restart=self.metrics.worker_restarts.inc)
        self.episodes = EpisodeService(settings, self.pool, self.metrics)
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

    async def _sweep(self) -> None:
        interval = min(max(self.settings.episode_ttl_s / 4.0, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            expired = await self.episodes.expire_idle()
            if expired:
                log.info("closed %d idle episodes (ttl %.0fs)", expired, self.settings.episode_ttl_s)
