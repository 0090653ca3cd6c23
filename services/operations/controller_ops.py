"""`controller`: the controller actor, behind the lifecycle interface (``ManagedService``)."""

import logging
from collections import Counter
from contextlib import suppress
from typing import Any

import ray

from services.contracts.operations import ServiceStatus
from services.controller.actor import start_controller
from services.operations.controller_client import ControllerClient
from services.operations.managed_service import Change, ManagedService, RunContext, started
from services.operations.redis_ops import RedisOps
from services.operations.restart_rules import RESTART_ERRORS
from services.operations.run_pieces import RunPieces
from services.ray_names import CONTROLLER_ACTOR, NAMESPACE
from services.ray_session import free_name
from services.run_dir import DECISIONS_FILE
from services.settings.per_service import ControllersSettings

log = logging.getLogger(__name__)


class ControllerOps(ManagedService[ControllersSettings]):
    """The `controller` actor, its state in Redis; the pipeline calls it through ``client``."""

    kind = "controller"
    client: ControllerClient | None = None

    def __init__(self, ctx: RunContext, counts: Counter[str], redis: RedisOps) -> None:
        super().__init__(ctx, counts)
        self.redis = redis

    def compose(self, run: RunPieces) -> ControllersSettings:
        return run.controllers

    def _actor(self) -> Any:
        decision_log = self.ctx.run.path(DECISIONS_FILE).resolve()  # what Redis loses is rebuilt from it
        return start_controller(
            self.settings,
            self.ctx.pieces.allow_unauthenticated_redis,
            self.ctx.run_id,
            self.redis.url,
            decision_log,
        )

    def start(self) -> None:
        self.client = ControllerClient(self._actor())

    def stop(self) -> None:
        if self.client is not None:
            self.client.kill()

    def replace(self, change: Change, step: int) -> str:
        """Killed for good; a fresh actor loads the state from Redis; a call in flight is sent again.

        This process creates the new actor and hands the client the creator's handle (the one
        reference that keeps it alive). A fresh actor that fails to come up is killed and tried
        once more: the old one is gone, so the run needs one (``start_or_restore``'s rule)."""
        self.restarted(change)  # refuses a config: the controller's settings all define the run
        client = started(self.client, self.kind)
        ray.kill(client.handle, no_restart=True)
        free_name(CONTROLLER_ACTOR, "the old controller")
        try:
            fresh = self._fresh_actor()
        except RESTART_ERRORS:
            log.exception("the new controller did not come up; trying once more")
            fresh = self._fresh_actor()  # a second failure is reported; calls wait for the next restart
        client.replace(fresh)
        self.counts[self.kind] += 1
        health = client.handle.health.remote()
        return f"controller replaced; resumed from Redis at step {ray.get(health).step}"

    def _fresh_actor(self) -> Any:
        """A new controller actor, or the error after killing what came up of it (so the name is free)."""
        try:
            return self._actor()
        except BaseException:
            with suppress(ValueError):  # ValueError: it never registered its name
                ray.kill(ray.get_actor(CONTROLLER_ACTOR, namespace=NAMESPACE), no_restart=True)
            free_name(CONTROLLER_ACTOR, "the failed controller")
            raise

    def status(self, step: int) -> list[ServiceStatus]:
        return [
            ServiceStatus(
                name="controller",
                health="ok",
                restarts=self.counts[self.kind],
                version=f"config {self.version()}",
                detail="state in Redis",
            )
        ]
