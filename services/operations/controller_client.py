"""The driver's calls to the `controller` actor, carried across a crash or a replacement of the actor.

Ray restarts a crashed controller itself (``max_restarts=-1``) and retries the call; `turnopd
restart controller` instead kills the actor for good and registers a fresh one under the same
name. A call that dies with the old actor is sent again to whichever actor holds the name next.
Sending again is safe: ``plan`` is a pure function of the persisted state, and ``ingest`` of a
step the state already holds returns the stored decision (``schedule.complete``).
"""

import logging
import threading
import time
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from services.contracts.controller import ProbeStats, StepDecision, StepPlan
from services.contracts.controller_state import ControllerState
from services.controller.actor import stop_controller
from services.errors import TurnOPDError
from services.ray_names import CONTROLLER_ACTOR as ACTOR_NAME
from services.ray_names import NAMESPACE

log = logging.getLogger(__name__)
_POLL_S = 0.2


class ControllerUnavailableError(TurnOPDError, RuntimeError):
    """No live `controller` actor answered within the timeout."""


class ControllerClient:
    def __init__(self, handle: Any, timeout_s: float = 300.0) -> None:
        self._handle = handle
        self._timeout_s = timeout_s
        self._lock = threading.Lock()

    @property
    def handle(self) -> Any:
        with self._lock:
            return self._handle

    def replace(self, handle: Any) -> None:
        """Use ``handle`` from now on (the restart path calls this once the new actor is ready)."""
        with self._lock:
            self._handle = handle

    def plan(self, step: int, lag: int = 0, env: str | None = None) -> StepPlan:
        """Step ``step``'s plan from ``env``'s controller (None: the run's only one)."""
        plan: StepPlan = self._call("plan", step, lag, env)
        return plan

    def ingest(
        self, step: int, stats: ProbeStats | None, lag: int = 0, env: str | None = None
    ) -> StepDecision:
        decision: StepDecision = self._call("ingest", step, stats, lag, env)
        return decision

    def rewind(self, step: int, env: str | None = None) -> ControllerState:
        state: ControllerState = self._call("rewind", step, env)
        return state

    def kill(self) -> None:
        """Kill the actor and wait until its name is free (the next run must create its own)."""
        stop_controller(self.handle)

    def _call(self, method: str, *args: Any) -> Any:
        deadline = time.monotonic() + self._timeout_s
        while True:
            handle = self.handle
            try:
                return ray.get(getattr(handle, method).remote(*args))
            except RayActorError as exc:
                log.warning(
                    "controller died during %s; sending it again to the next controller: %s", method, exc
                )
                self._await_successor(handle, deadline)

    def _await_successor(self, dead: Any, deadline: float) -> None:
        """Wait until an actor other than ``dead`` holds the controller name and answers."""
        while time.monotonic() < deadline:
            handle = self.handle
            if handle is dead:
                try:
                    handle = ray.get_actor(ACTOR_NAME, namespace=NAMESPACE)
                except ValueError:
                    time.sleep(_POLL_S)
                    continue
            try:
                ray.get(handle.ready.remote(), timeout=max(0.1, deadline - time.monotonic()))
            except (RayActorError, GetTimeoutError):
                time.sleep(_POLL_S)
                continue
            self.replace(handle)
            return
        raise ControllerUnavailableError(f"no controller answered within {self._timeout_s:.0f} s")
