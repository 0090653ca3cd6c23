"""The driver's word that the controller rebuilt what Redis lost, on the run's own console.

The controller puts back the steps Redis lost from the run's controller.jsonl and logs it in its own
process, whose output Ray does not pass to the driver; its ``health`` counts the steps it rebuilt.
The driver asks after the resume and after every step (one small actor call) and warns once per rebuild.
"""

import logging

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from services.contracts.operations import ControllerHealth
from services.operations.controller_client import ControllerClient

log = logging.getLogger(__name__)


class RebuildNotices:
    """Warns on the console when the controller's count of rebuilt steps grows."""

    def __init__(self, controller: ControllerClient, timeout_s: float = 10.0) -> None:
        self._controller = controller
        self._timeout_s = timeout_s
        self._seen: tuple[int, int] = (0, 0)  # (the actor's pid, the rebuilt steps it reported)

    def check(self) -> None:
        try:
            health: ControllerHealth = ray.get(
                self._controller.handle.health.remote(), timeout=self._timeout_s
            )
        except (RayActorError, GetTimeoutError):
            return  # a controller being restarted: the next check asks its successor
        pid, seen = self._seen
        if health.pid != pid:
            seen = 0  # a new actor counts from 0
        if health.rebuilt_steps > seen:
            log.warning("controller: %s (%d step(s) rebuilt so far)", health.rebuilt, health.rebuilt_steps)
        self._seen = (health.pid, health.rebuilt_steps)
