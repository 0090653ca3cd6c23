"""Every rollout worker on its way up or out, moved on one Ray call at a time by the pool's owner.

A start never blocks: it makes one call (``ready``, ``weights_version``, ``load_weights``) or checks
one name, and the owner waits for its answer beside the chunks in flight, so the other workers keep
playing while one is replaced, grown, restarted by Ray or loaded.

* fresh (a replacement): kill the old actor, wait for its name, start the new one, ``ready``, load
  the published weights until the version holds still; then it plays with its new settings. One
  that does not come up (``restart_timeout_s`` per call) is killed and, once its name is free, the
  worker is left lost with its old settings and the error is the replacement's answer.
* fresh (a growth): the same from ``ready`` on (``ready_timeout_s``), then parked until every new
  worker of the growth is up; one failure takes them all back.
* recover (Ray restarts a crashed actor): ``ready`` (an "actor died" answer is tried again, up to
  ``_DEAD_POLLS`` times; "unavailable", Ray still restarting it, until the deadline), ``weights_version``, a reload if it differs; lost after ``restart_timeout_s``.
* load (a publish): ``load_weights``; a changed incarnation means Ray restarted the worker while it
  was idle; a death turns it into a recovery; an error (weights it cannot fetch) leaves it idle at
  the version it held, and the publish raises it.
* retire (a shrink, a killed actor): wait until its name is free.
"""

import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

import ray
from ray.exceptions import ActorUnavailableError, RayActorError

from services.errors import ConflictError, InputError, TurnOPDError
from services.ray_names import NAMESPACE
from services.rollout_worker.actor import start_worker, worker_name
from services.rollout_worker.pool_members import Published, Roster, Start
from services.rollout_worker.pool_stats import PoolStats
from services.settings.per_service import RolloutWorkerServiceSettings

log = logging.getLogger(__name__)

_DEAD_POLL_S = 0.5
_DEAD_POLLS = 20  # consecutive "actor died" answers before a worker counts as gone for good
_NAME_POLL_S = 0.1
_NAME_FREE_S = 60.0  # a replaced worker's name, before its new actor can take it
_RETIRED_NAME_S = 30.0  # a retired worker's name, before the shrink is over


class WorkerStarts:
    """The starts in flight, one per worker at most (owner only). ``published``, ``gateway_url`` and
    ``restart_timeout_s`` read the pool's current ones."""

    def __init__(
        self,
        roster: Roster,
        stats: PoolStats,
        model: str,
        published: Callable[[], Published],
        gateway_url: Callable[[], str],
        restart_timeout_s: Callable[[], float],
    ) -> None:
        self._roster = roster
        self._stats = stats
        self._model = model
        self._published = published
        self._gateway_url = gateway_url
        self._restart_timeout_s = restart_timeout_s
        self._starts: dict[int, Start] = {}
        self._growth: set[int] = set()  # the new workers of a growth under way
        self._growth_error: BaseException | None = None
        self.load_errors: list[BaseException] = []  # what loads of published weights raised, for the publish

    def __bool__(self) -> bool:
        return bool(self._starts)

    def __contains__(self, index: int) -> bool:
        return index in self._starts

    def calls(self) -> dict[Any, Start]:
        """The calls in flight (ObjectRef -> its start)."""
        return {s.ref: s for s in self._starts.values() if s.ref is not None}

    def next_time(self) -> float:
        """The next deadline or retry of a start (monotonic seconds)."""
        times = [s.deadline if s.ref is not None else (s.retry_at or math.inf) for s in self._starts.values()]
        return min(times, default=math.inf)

    # --- beginnings -----------------------------------------------------------------------------

    def recover(self, index: int) -> None:
        """Wait for Ray to restart worker ``index`` (it crashed) and give it the published weights."""
        member = self._roster[index]
        start = Start(index, "recover", "ready", member.handle, member.settings)
        start.until = time.monotonic() + self._restart_timeout_s()
        self._begin(start)
        self._call_ready(start)

    def load(self, index: int, rewind: bool) -> None:
        """Give idle worker ``index`` the weights just published."""
        member = self._roster[index]
        start = Start(index, "load", "load", member.handle, member.settings)
        self._begin(start)
        self._call_load(start, rewind)

    def replace(
        self, index: int, settings: RolloutWorkerServiceSettings | None, answer: "Future[Any]"
    ) -> None:
        """Kill worker ``index``'s actor and start a fresh one (``settings``, else its own); ``answer``
        is answered once it plays, or with the error that stopped it."""
        member, name = self._roster[index], worker_name(index)
        if member.leaving:
            raise ConflictError(f"{name} is leaving the pool (a shrink is under way)")
        running = self._starts.get(index)
        if running is not None and running.kind == "fresh":
            if running.before is None:
                raise ConflictError(f"{name} is still starting (a scale is under way)")
            raise InputError(f"{name} is already being replaced")
        # a recovery or a load in flight is dropped: the fresh actor loads the published weights
        settings = settings or member.settings
        ray.kill(member.handle, no_restart=True)
        now, timeout = time.monotonic(), settings.restart_timeout_s
        late = (
            f"the new {name} was not ready within {timeout:.0f} s (rollout_worker.restart_timeout_s); "
            "does the cluster have the resources it asks for?"
        )
        start = Start(index, "fresh", "name", None, settings, deadline=now + _NAME_FREE_S, retry_at=now)
        start.timeout_s, start.late, start.answer, start.before = timeout, late, answer, member
        self._begin(start)

    def grow(
        self, index: int, handle: Any, settings: RolloutWorkerServiceSettings, count: int, kept: int
    ) -> None:
        """Bring up ``handle``, new worker ``index`` of a growth of ``count`` (the pool keeps its ``kept``
        if one fails); its member is already in the roster, starting."""
        timeout = settings.ready_timeout_s
        late = (
            f"the {count} new rollout worker(s) were not ready within {timeout:.0f}s "
            f"(rollout_worker.ready_timeout_s): their {settings.models.engine} engine was still "
            f"starting; the pool keeps its {kept}"
        )
        start = Start(index, "fresh", "ready", handle, settings, timeout_s=timeout, late=late)
        self._starts[index] = start
        self._growth.add(index)
        self._call_ready(start)

    def leave(self, index: int) -> None:
        """Worker ``index`` is leaving (a shrink): retire it now unless a chunk or a fresh start is
        under way (then it retires once that is over)."""
        member, start = self._roster[index], self._starts.get(index)
        if start is not None and start.kind in ("recover", "load"):
            del self._starts[index]
            self.retire(index)
        elif start is None and member.state in ("idle", "lost"):
            self.retire(index)

    def retire(self, index: int) -> None:
        """Kill worker ``index``'s actor for good; it is gone once its name is free."""
        member = self._roster[index]
        ray.kill(member.handle, no_restart=True)
        self._roster.set(index, replace(member, state="gone"))
        now = time.monotonic()
        self._starts[index] = Start(
            index, "retire", "name", None, member.settings, deadline=now + _RETIRED_NAME_S, retry_at=now
        )

    def growth_over(self) -> tuple[bool, BaseException | None]:
        """(over, error) of the growth under way: over once every new worker is up (they play from now
        on), or once every one is taken back after one failed (with that failure)."""
        error = self._growth_error
        if error is None and all(self._parked(i) for i in self._growth):
            for index in self._growth:
                del self._starts[index]
                self._roster.set(index, replace(self._roster[index], state="idle"))
        elif error is None or any(i in self._starts for i in self._growth):
            return False, None
        self._growth, self._growth_error = set(), None
        return True, error

    def close(self, error: BaseException) -> list[Any]:
        """Forget every start, answering a replacement with ``error``; the actors they started."""
        handles = [s.handle for s in self._starts.values() if s.handle is not None]
        for start in self._starts.values():
            if start.answer is not None and not start.answer.done():
                start.answer.set_exception(error)
        self._starts.clear()
        self._growth, self._growth_error = set(), None
        return handles

    # --- what moves a start on ------------------------------------------------------------------

    def answered(self, start: Start) -> None:
        """Take the answer of ``start``'s call in flight."""
        ref, start.ref = start.ref, None
        try:
            value = ray.get(ref)
        except RayActorError as exc:
            self._died(start, exc)
            return
        except Exception as exc:  # an error, not a death: weights it cannot load, or cannot fetch
            if start.kind == "fresh":
                self._fail(start, exc)
                return
            log.error("%s failed at its %s: %s", worker_name(start.index), start.step, exc)
            if start.kind == "load":
                # the actor is alive at the version it held (weights whose owner died before it
                # fetched them: a learner killed as it published): the publish answers the error,
                # and the next one (the run's rewind to its checkpoint) loads it again
                self.load_errors.append(exc)
                self._idle(start)
            else:
                self._lose(start)
            return
        match start.step:
            case "ready":
                self._ready(start, str(value))
            case "held":
                self._held(start, int(value))
            case "load":
                self._loaded(start, str(value))
            case _:
                raise AssertionError(f"a start at step {start.step!r} has no call in flight")

    def on_time(self, now: float) -> None:
        """Give up the calls past their deadline; make the checks and retries that are due."""
        for start in list(self._starts.values()):
            if self._starts.get(start.index) is not start:
                continue  # ended or replaced by another's move
            if start.ref is None:
                if start.retry_at is not None and now >= start.retry_at:
                    start.retry_at = None
                    if start.step == "ready":
                        self._call_ready(start)
                    else:
                        self._check_name(start, now)
            elif now >= start.deadline and not ray.wait([start.ref], timeout=0)[0]:
                self._expired(start)

    def _begin(self, start: Start) -> None:
        self._starts[start.index] = start
        self._roster.set(start.index, replace(self._roster[start.index], state="starting"))

    def _call_ready(self, start: Start) -> None:
        start.step, start.ref = "ready", start.handle.ready.remote()
        start.deadline = start.until if start.kind == "recover" else time.monotonic() + start.timeout_s

    def _call_load(self, start: Start, rewind: bool) -> None:
        published = self._published()
        start.step, start.version = "load", published.version
        start.ref = start.handle.load_weights.remote(published.ref, published.version, rewind)
        start.deadline = time.monotonic() + start.timeout_s

    def _ready(self, start: Start, incarnation: str) -> None:
        index = start.index
        self._roster.set(index, replace(self._roster[index], incarnation=incarnation))
        if start.kind == "recover":
            start.step, start.ref = "held", start.handle.weights_version.remote()
            start.deadline = math.inf
        elif self._published().ref is not None:
            self._call_load(start, rewind=True)
        else:
            self._up(start)

    def _held(self, start: Start, held: int) -> None:
        published = self._published()
        if held != published.version and published.ref is not None:
            self._call_load(start, rewind=True)
        else:
            self._up(start)

    def _loaded(self, start: Start, incarnation: str) -> None:
        """A load answered with the actor's incarnation id."""
        index, name = start.index, worker_name(start.index)
        member = self._roster[index]
        if start.kind == "load" and incarnation != member.incarnation:
            # Ray restarted it while it was idle: it came back at version 0, which it may even
            # have played since, when version 0 was the published one
            log.warning("%s was restarted by Ray since the last publish", name)
            self._stats.crashes_by_worker[index] += 1
        self._roster.set(index, replace(member, incarnation=incarnation))
        if start.kind == "recover":
            self._stats.weight_reloads += 1
            log.info("%s reloaded weights version %d", name, start.version)
        if start.version != self._published().version:  # a publish came meanwhile
            self._call_load(start, rewind=True)
        else:
            self._up(start)

    def _up(self, start: Start) -> None:
        """``start``'s worker holds the published weights: it plays (a growth's, once all are up)."""
        index = start.index
        if start.kind == "fresh" and start.before is None:
            start.step, start.deadline = "parked", math.inf
            return
        del self._starts[index]
        member = self._roster[index]
        if start.kind == "fresh":
            self._stats.replacements_by_worker[index] += 1
            member = replace(member, settings=start.settings)
        self._roster.set(index, replace(member, state="idle"))
        if start.answer is not None:
            start.answer.set_result(None)
        if member.leaving:
            self.retire(index)

    def _died(self, start: Start, exc: RayActorError) -> None:
        now = time.monotonic()
        match start.kind:
            case "fresh":
                self._fail(start, exc)
            case "load":
                self._stats.worker_deaths += 1
                self._stats.crashes_by_worker[start.index] += 1
                start.kind, start.until = "recover", now + self._restart_timeout_s()
                self._call_ready(start)
            case "recover":
                # Ray answers "unavailable" while it restarts the actor (slowly, on a busy machine):
                # only "died" answers count towards giving it up early; either way, until ``until``
                if not isinstance(exc, ActorUnavailableError):
                    start.dead_answers += 1
                if start.dead_answers >= _DEAD_POLLS or now >= start.until:
                    self._lose(start)
                else:
                    start.step, start.retry_at = "ready", now + _DEAD_POLL_S
            case _:
                raise AssertionError(f"a {start.kind} start has no call to die in")

    def _expired(self, start: Start) -> None:
        match start.kind:
            case "fresh":
                self._fail(start, TurnOPDError(start.late))
            case "recover":
                self._lose(start)
            case _:
                raise AssertionError(f"a {start.kind} start has no deadline")

    def _idle(self, start: Start) -> None:
        """``start`` is over without a change: its worker plays again (or retires, if leaving)."""
        del self._starts[start.index]
        member = replace(self._roster[start.index], state="idle")
        self._roster.set(start.index, member)
        if member.leaving:
            self.retire(start.index)

    def _lose(self, start: Start) -> None:
        log.error("%s did not come back; the pool goes on without it", worker_name(start.index))
        del self._starts[start.index]
        self._roster.set(start.index, replace(self._roster[start.index], state="lost"))

    def _fail(self, start: Start, error: BaseException) -> None:
        """A fresh start failed: kill its actor, and end it with ``error`` once the name is free (a
        growth's: take the growth's other new workers back too)."""
        if start.error is not None:
            return
        start.error, start.ref = error, None
        if start.handle is None:  # no actor started: the name was never freed
            self._end_failed(start)
        else:
            ray.kill(start.handle, no_restart=True)
            now = time.monotonic()
            start.step, start.deadline, start.retry_at = "name", now + _NAME_FREE_S, now
        if start.index in self._growth:
            self._growth_error = self._growth_error or error
            for other in list(self._growth):
                sibling = self._starts.get(other)
                if sibling is not None:
                    self._fail(sibling, error)

    def _check_name(self, start: Start, now: float) -> None:
        name = worker_name(start.index)
        try:
            ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            self._named(start)
            return
        if now < start.deadline:
            start.retry_at = now + _NAME_POLL_S
        elif start.kind == "fresh" and start.error is None:  # the replaced actor keeps its name
            self._fail(
                start,
                TurnOPDError(f"the killed {name}'s name {name!r} is still taken after {_NAME_FREE_S:.0f} s"),
            )
        else:
            log.warning("%s's name is still taken after its actor was killed", name)
            self._named(start)

    def _named(self, start: Start) -> None:
        """``start``'s worker name is free: start the new actor, or end."""
        index = start.index
        if start.kind == "fresh" and start.error is None:
            try:
                handle = start_worker(start.settings, index, self._gateway_url(), self._model)
            except Exception as exc:
                self._fail(start, exc)
                return
            start.handle = handle
            self._roster.set(index, replace(self._roster[index], handle=handle))
            self._call_ready(start)
        elif start.kind == "fresh":
            self._end_failed(start)
        else:
            del self._starts[index]  # a retirement: its worker is gone

    def _end_failed(self, start: Start) -> None:
        index = start.index
        del self._starts[index]
        if start.before is None:  # a growth's: taken out with the growth
            self._roster.set(index, replace(self._roster[index], state="gone"))
            return
        member = replace(start.before, state="lost", leaving=self._roster[index].leaving)
        self._roster.set(index, member)
        if start.answer is not None and start.error is not None:
            start.answer.set_exception(start.error)
        if member.leaving:
            self.retire(index)

    def _parked(self, index: int) -> bool:
        start = self._starts.get(index)
        return start is not None and start.step == "parked"
