"""The driver's calls to the `controller` actor, carried across a crash or a replacement of the actor.

Ray restarts a crashed controller itself (``max_restarts=-1``) under the same handle and retries
nothing; `turnopd restart controller` instead kills the actor for good and its owner
(``ControllerOps``) creates a fresh one under the same name and hands it to ``replace``. A call that
dies with the old actor is sent again to whichever comes first: the same handle answering again
(Ray's restart) or the handle the owner installed. Sending again is safe: ``plan`` is a pure
function of the persisted state, and ``ingest`` of a step the state already holds returns the
stored decision (``schedule.complete``).

The client never installs a handle it looked up by name: Ray keeps a non-detached actor alive only
while its owner (the process that created it) holds a reference, and a ``ray.get_actor`` handle is
not one. Were the owner's handle dropped for a looked-up one, Ray would collect the new controller
at the next garbage collection (issue 33).
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

log = logging.getLogger(__name__)
_POLL_S = 0.2
_READY_WAIT_S = 5.0  # one wait for a restarting actor, before looking for a replacement again


class ControllerUnavailableError(TurnOPDError, RuntimeError):
    """No live `controller` actor answered within the timeout."""


class ControllerClient:
    def __init__(self, handle: Any, timeout_s: float = 300.0) -> None:
        self._handle = handle
        self._timeout_s = timeout_s
        self._changed = threading.Condition()

    @property
    def handle(self) -> Any:
        with self._changed:
            return self._handle

    def replace(self, handle: Any) -> None:
        """Use ``handle`` from now on: only the actor's owner calls this, with the handle it created
        (the restart path, once the new actor is ready); calls waiting for a successor go to it."""
        with self._changed:
            self._handle = handle
            self._changed.notify_all()

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
        """Wait until ``dead`` answers again (Ray restarted it) or the owner installed another handle."""
        while time.monotonic() < deadline:
            with self._changed:
                if self._handle is not dead:
                    return
            try:
                wait_s = min(_READY_WAIT_S, max(0.1, deadline - time.monotonic()))
                ray.get(dead.ready.remote(), timeout=wait_s)
                return
            except (RayActorError, GetTimeoutError):
                with self._changed:  # killed for good: wait for the owner's replacement
                    self._changed.wait_for(lambda: self._handle is not dead, timeout=_POLL_S)
        raise ControllerUnavailableError(f"no controller answered within {self._timeout_s:.0f} s")
