"""The driver's restart loop: a task on the driver's event loop that takes restart requests from the
`run-control` actor and carries them out.

It also watches the processes this run started that nothing else restarts: the embedded
redis-server and the local env gateway process. One that has exited (killed, OOM) is restarted as
`turnopd restart redis` / `env-gateway` would, unasked (a ``watchdog-…`` request, in
``restarts.jsonl`` and `turnopd status`): the controller's store reconnects to the new
redis-server on its append-only file, and the pool plays every later request against the new
gateway, playing again whole each chunk that lost episodes with the old one. (Ray itself restarts
rollout workers, the controller and `run-control`; the run restarts a lost learner,
``services.orchestrator.learner_recovery``.)

Requests are messages, taken and queued on the loop (no lock: only the loop touches the queues).
Every service but the learner is replaced by the loop's task, one request after the other, each
restart run off the loop (``blocking``) while the step loop goes on (``services.operations.restarts``
says how each stays correct). Learner requests wait for the next step boundary, where the step loop
awaits ``at_step_boundary`` (which also collects requests itself, so a learner restart never waits
behind a slow restart of another service): the learner is stateful and is only swapped when no step
is in flight.
"""

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from services.blocking import blocking
from services.contracts.operations import RestartRequest, RestartResult
from services.operations.env_gateway_ops import EnvGatewayOps
from services.operations.live_status import LiveRun
from services.operations.redis_ops import RedisOps
from services.operations.restart_rules import service_kind
from services.operations.restarts import ServiceRestarts
from services.run_dir import RESTARTS_FILE

log = logging.getLogger(__name__)
STOP_WAIT_S = 600.0  # how long the run's end waits for a restart under way


class RestartLoop:
    def __init__(
        self,
        live: LiveRun,
        restarts: ServiceRestarts,
        poll_s: float = 0.5,
        on_restarted: Callable[[], None] = lambda: None,
    ) -> None:
        self.on_restarted = on_restarted  # after each restart (the run's plan file follows)
        self.live = live
        self.restarts = restarts
        self.control: Any = live.control
        self.poll_s = poll_s
        self._pending: deque[RestartRequest] = deque()  # for the loop's task, oldest first
        self._deferred: list[RestartRequest] = []  # learner restarts, for the next step boundary
        self._failure: BaseException | None = None
        # the processes nothing else restarts: an embedded redis-server, a local env gateway
        self.watched = [s for s in restarts.services.values() if isinstance(s, RedisOps | EnvGatewayOps)]
        self._reviving: set[str] = set()  # watched services with a restart filed and not yet done
        self._deaths = 0
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> "RestartLoop":
        """Start taking requests, as a task of the running loop."""
        self._task = asyncio.create_task(self._run(), name="restart-loop")
        return self

    async def _collect(self) -> None:
        """Take the filed requests from `run-control`: learner ones wait for a boundary, the rest queue here."""
        for request in await self.control.take.remote():
            if service_kind(request.service) == "learner":
                self._deferred.append(request)
                log.info("learner restart %s waits for the next step boundary", request.request_id)
            else:
                self._pending.append(request)

    def _watch(self) -> None:
        """File a restart for each watched process found dead (once per death)."""
        for service in self.watched:
            if not service.lost or service.kind in self._reviving:
                continue
            self._deaths += 1
            log.warning("%s has exited (not stopped by the run): restarting it", service.kind)
            request = RestartRequest(
                request_id=f"watchdog-{service.kind}-{self._deaths}", service=service.kind
            )
            self._reviving.add(service.kind)
            self._pending.append(request)

    def _next(self) -> RestartRequest | None:
        return self._pending.popleft() if self._pending else None

    async def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                self._watch()
                await self._collect()
                request = self._next()
                if request is None:
                    with suppress(TimeoutError):
                        await asyncio.wait_for(self._stopping.wait(), self.poll_s)
                    continue
                log.info("restarting %s (request %s)", request.service, request.request_id)
                await self._carry_out(request, self.live.steps_done)
                self._reviving.discard(request.service)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # raised in the step loop by check(), at the next boundary
            log.exception("the restart loop failed")
            self._failure = exc

    async def _carry_out(self, request: RestartRequest, steps_done: int) -> None:
        """``request`` carried out off the loop, with `turnopd status` showing its service as
        restarting meanwhile, then recorded and answered."""
        await self._answer(await blocking(self.restarts.run, request, steps_done, on_start=self.live.publish))

    async def _answer(self, result: RestartResult) -> None:
        await blocking(self._record, result)
        await self.control.complete.remote(result)  # whoever waits then sees its effect in the status

    def _record(self, result: RestartResult) -> None:
        log.info("restart of %s: %s (%.1f s)", result.service, result.message, result.seconds)
        self.live.stack.run.append(RESTARTS_FILE, result.model_dump_json())
        if result.ok:
            self.on_restarted()
        self.live.publish()

    def check(self) -> None:
        """Raise in the caller what broke the loop (a bug, never a failed restart)."""
        if self._failure is not None:
            raise self._failure

    async def at_step_boundary(self, steps_done: int) -> None:
        """Carry out the learner restarts filed so far (the step loop awaits this between steps)."""
        self.check()
        await self._collect()
        deferred, self._deferred = self._deferred, []
        for request in deferred:
            await self._carry_out(request, steps_done)

    async def stop(self) -> None:
        """Stop taking requests (a restart under way ends first) and answer the ones left: the run is over."""
        self._stopping.set()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=STOP_WAIT_S)
        left = await self.control.close.remote()
        left = [*self._pending, *self._deferred, *left]
        self._pending.clear()
        self._deferred.clear()
        for request in left:
            now = time.time()
            await self._answer(
                RestartResult(
                    request_id=request.request_id,
                    service=request.service,
                    ok=False,
                    message="not done: the run finished first",
                    started_at=now,
                    seconds=0.0,
                    step=self.live.steps_done,
                ),
            )
