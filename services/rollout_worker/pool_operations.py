"""What the rollout pool's owner does with each operation (``pool_messages.py``), and the state the
operations change: the settings, the published weights, the env gateway (owner only; other threads
read ``published``, ``gateway`` and ``own``, each replaced whole, never changed in place).

A message is applied in its turn or put off: a publish while a play runs (the play goes on at its
version; the next owner applies it), a resize while another is under way. Its answer comes once
what it started is over (``check``): a growth once every new worker is up, a shrink once the
leaving workers are gone, a publish once every worker's load is over.
"""

import logging
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

import ray

from services.cluster_capacity import check_free_resources
from services.errors import InputError, TurnOPDError
from services.rollout_worker.actor import start_worker, worker_name, worker_resources
from services.rollout_worker.engines.base import next_version
from services.rollout_worker.pool_members import Gateway, Member, Published, Roster
from services.rollout_worker.pool_messages import (
    Close,
    KeepWeights,
    PoolMessage,
    PublishWeights,
    ReplaceWorker,
    Resize,
    SwitchGateway,
)
from services.rollout_worker.pool_stats import PoolStats
from services.rollout_worker.worker_starts import WorkerStarts
from services.settings.per_service import RolloutWorkerServiceSettings

log = logging.getLogger(__name__)


@dataclass
class _Resizing:
    """A resize under way (one at a time: a later one waits for it)."""

    before: int
    size: int
    answer: "Future[Any]"


class PoolOperations:
    """The operations' state and their effects on ``roster`` (owner only). ``own``: the settings of
    the pool's last start, resize or retune; ``playing``: a play owns the pool now."""

    def __init__(
        self,
        roster: Roster,
        stats: PoolStats,
        own: RolloutWorkerServiceSettings,
        model: str,
        gateway_url: str,
    ) -> None:
        self.roster = roster
        self.own = own
        self.model = model
        self.published = Published(None, 0)
        self.gateway = Gateway(gateway_url, 0)
        self.starts = WorkerStarts(
            roster,
            stats,
            model,
            lambda: self.published,
            lambda: self.gateway.url,
            lambda: self.own.restart_timeout_s,
        )
        self.playing = False
        self._deferred: list[tuple[PoolMessage, Future[Any]]] = []
        self._resizing: _Resizing | None = None
        self._settling: list[Future[Any]] = []  # publishes, answered once no start is in flight
        self._closed = False

    def busy(self, playing: bool) -> bool:
        """Something is under way: a start, a resize, a publish's loads; or, outside a play, a
        message put off (a play's are the next owner's: their posters wait)."""
        return (
            bool(self.starts)
            or self._resizing is not None
            or bool(self._settling)
            or (not playing and bool(self._deferred))
        )

    def apply_inbox(self, taken: list[tuple[PoolMessage, "Future[Any]"]]) -> None:
        """Apply the messages put off before, then ``taken`` (the new ones)."""
        queued, self._deferred = self._deferred, []
        for message, answer in [*queued, *taken]:
            try:
                if not self._apply(message, answer):
                    self._deferred.append((message, answer))
            except Exception as exc:
                if not answer.done():
                    answer.set_exception(exc)
        self.check()

    def check(self) -> None:
        """Answer the resize and the publishes whose workers are done."""
        resizing = self._resizing
        if resizing is not None and resizing.size > resizing.before:
            self._check_growth(resizing)
        elif resizing is not None:
            leaving = range(resizing.size, resizing.before)
            if all(self.roster[i].state == "gone" and i not in self.starts for i in leaving):
                self.roster.truncate(resizing.size)
                self._resizing = None
                log.info("rollout pool shrunk %d -> %d workers", resizing.before, resizing.size)
                resizing.answer.set_result(resizing.before)
        if self._settling and not self.starts:
            settled, self._settling = self._settling, []
            errors, self.starts.load_errors = self.starts.load_errors, []
            for answer in settled:
                if errors:
                    answer.set_exception(errors[0])
                else:
                    answer.set_result(None)

    def _apply(self, message: PoolMessage, answer: "Future[Any]") -> bool:
        """Apply ``message``, answering now or once what it started is over; False: not yet (kept for later)."""
        if self._closed and not isinstance(message, Close):
            raise TurnOPDError("the rollout pool is closed")
        match message:
            case ReplaceWorker(index=index, settings=settings):
                check_index(index, len(self.roster))
                self.starts.replace(index, settings, answer)
            case Resize(size=size, settings=settings):
                if self._resizing is not None:
                    return False
                self._resize(size, settings, answer)
            case SwitchGateway(url=url):
                self.gateway = Gateway(url, self.gateway.generation + 1)
                answer.set_result(None)
            case PublishWeights(weights_ref=ref, version=version, rewind=rewind):
                if self.playing:
                    return False  # the play goes on at its version; the next one plays this one
                self._publish(ref, version, rewind)
                self._settling.append(answer)
            case KeepWeights(owned=owned, version=version):
                if self.published.version == version:  # else a newer publish came, with its own reference
                    self.published = Published(owned, version)
                answer.set_result(None)
            case Close():
                self._close()
                answer.set_result(None)
            case _:
                raise TypeError(f"not a rollout pool message: {message!r}")
        return True

    def _resize(self, size: int, settings: RolloutWorkerServiceSettings, answer: "Future[Any]") -> None:
        before = len(self.roster)
        self.own = settings
        if size > before:
            check_free_resources(
                ray.available_resources(), worker_resources(settings), size - before, "rollout worker"
            )
            self._resizing = _Resizing(before, size, answer)
            for index in range(before, size):
                handle = start_worker(settings, index, self.gateway.url, self.model)
                self.roster.append(Member(handle, settings, None, state="starting"))
                self.starts.grow(index, handle, settings, size - before, before)
        elif size < before:
            self._resizing = _Resizing(before, size, answer)
            for index in range(size, before):
                self.roster.set(index, replace(self.roster[index], leaving=True))
                self.starts.leave(index)
        else:
            answer.set_result(before)

    def _publish(self, weights_ref: Any, version: int, rewind: bool) -> None:
        next_version(self.published.version, version, rewind)
        if isinstance(weights_ref, Mapping):
            weights_ref = ray.put(dict(weights_ref))
        elif not isinstance(weights_ref, ray.ObjectRef):
            raise InputError(
                f"weights must be an ObjectRef or a state dict, got {type(weights_ref).__name__}"
            )
        self.published = Published(weights_ref, version)
        for index, member in enumerate(self.roster):
            if member.state == "idle":  # the others load it at the end of their start
                self.starts.load(index, rewind)

    def _check_growth(self, growth: _Resizing) -> None:
        over, error = self.starts.growth_over()
        if not over:
            return
        self._resizing = None
        if error is None:
            log.info(
                "rollout pool grown %d -> %d workers at weights version %d",
                growth.before,
                growth.size,
                self.published.version,
            )
            growth.answer.set_result(growth.before)
        else:
            self.roster.truncate(growth.before)
            growth.answer.set_exception(error)

    def _close(self) -> None:
        closed = TurnOPDError("the rollout pool closed")
        handles = [m.handle for m in self.roster] + self.starts.close(closed)
        for handle in handles:
            ray.kill(handle, no_restart=True)
        self.roster.truncate(0)
        self._closed = True
        waiting = [answer for _, answer in self._deferred] + self._settling
        if self._resizing is not None:
            waiting.append(self._resizing.answer)
        self._deferred, self._settling, self._resizing = [], [], None
        for answer in waiting:
            if not answer.done():
                answer.set_exception(closed)


def check_index(index: int, size: int) -> None:
    if not 0 <= index < size:
        raise InputError(f"no {worker_name(index)}: the pool has workers 0..{size - 1}")
