"""The driver's thread that takes restart requests from the `run-control` actor and carries them out.

Every service but the learner is replaced at once, on this thread, while the step loop goes on
(``services.orchestrator.restarts`` says how each stays correct). Learner requests wait for the
next step boundary, where the step loop calls ``at_step_boundary``: the learner is stateful and
is only swapped when no step is in flight.
"""

import logging
import threading
import time
from typing import Any

import ray

from services.contracts.operations import RestartRequest, RestartResult
from services.orchestrator.live_status import LiveRun
from services.orchestrator.restart_settings import service_kind
from services.orchestrator.restarts import ServiceRestarts
from services.orchestrator.run_dir import RESTARTS_FILE

log = logging.getLogger(__name__)


class RestartLoop:
    def __init__(self, live: LiveRun, restarts: ServiceRestarts, poll_s: float = 0.5) -> None:
        self.live = live
        self.restarts = restarts
        self.control: Any = live.control
        self.poll_s = poll_s
        self._deferred: list[RestartRequest] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="restart-loop", daemon=True)

    def start(self) -> "RestartLoop":
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for request in ray.get(self.control.take.remote()):
                    self._handle(request)
                self._stop.wait(self.poll_s)
        except BaseException as exc:  # re-raised on the step loop's thread by check()
            log.exception("the restart loop failed")
            self._failure = exc

    def _handle(self, request: RestartRequest) -> None:
        if service_kind(request.service) == "learner":
            with self._lock:
                self._deferred.append(request)
            log.info("learner restart %s waits for the next step boundary", request.request_id)
            return
        log.info("restarting %s (request %s)", request.service, request.request_id)
        self._finish(self.restarts.run(request, self.live.steps_done))

    def _finish(self, result: RestartResult) -> None:
        log.info("restart of %s: %s (%.1f s)", result.service, result.message, result.seconds)
        self.live.stack.run.append(RESTARTS_FILE, result.model_dump_json())
        ray.get(self.control.complete.remote(result))
        self.live.publish()

    def check(self) -> None:
        """Raise on the caller's thread what broke the loop (a bug, never a failed restart)."""
        if self._failure is not None:
            raise self._failure

    def at_step_boundary(self, steps_done: int) -> None:
        """Carry out the learner restarts filed so far (the step loop calls this between steps)."""
        self.check()
        with self._lock:
            deferred, self._deferred = self._deferred, []
        for request in deferred:
            self._finish(self.restarts.run(request, steps_done))

    def stop(self) -> None:
        """Stop taking requests and answer the ones left: the run is over."""
        self._stop.set()
        self._thread.join(timeout=600)
        left = ray.get(self.control.close.remote())
        with self._lock:
            left, self._deferred = [*self._deferred, *left], []
        for request in left:
            now = time.time()
            self._finish(
                RestartResult(
                    request_id=request.request_id,
                    service=request.service,
                    ok=False,
                    message="not done: the run finished first",
                    started_at=now,
                    seconds=0.0,
                    step=self.live.steps_done,
                )
            )
