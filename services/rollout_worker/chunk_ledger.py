"""One play's chunks: which wait, which are in flight (and until when), which came back or failed (pure)."""

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from services.contracts.rollout import EpisodeFailure, FailureReason, RolloutRequest, RolloutResult


@dataclass(frozen=True)
class InFlight:
    """A chunk handed to worker ``worker`` (actor ``handle``) against the env gateway of ``generation``."""

    worker: int
    chunk: int
    generation: int
    handle: Any


class ChunkLedger:
    """The chunks of one play (``requests``), each played at most ``max_attempts`` times; one in flight
    longer than ``timeout_s`` is overdue."""

    def __init__(
        self, requests: Sequence[RolloutRequest], max_attempts: int, timeout_s: float | None
    ) -> None:
        self.requests = requests
        self.max_attempts = max_attempts
        self.timeout_s = timeout_s
        self.pending = deque(range(len(requests)))
        self.attempts = [0] * len(requests)
        self.results: dict[int, RolloutResult] = {}
        self.failed: dict[int, list[EpisodeFailure]] = {}
        self.inflight: dict[Any, InFlight] = {}  # the call's ObjectRef -> its chunk
        self.due: dict[Any, float] = {}  # the call's ObjectRef -> when its chunk is overdue
        self.silent: dict[int, float] = {}  # env generation -> until when chunks wait for the next gateway
        self.gateway_wait: tuple[int, float] | None = None  # no chunk goes out while this gateway is silent

    def finished(self) -> bool:
        return not self.pending and not self.inflight

    def next_chunk(self) -> int:
        chunk = self.pending.popleft()
        self.attempts[chunk] += 1
        return chunk

    def sent(self, ref: Any, flight: InFlight) -> None:
        self.inflight[ref] = flight
        if self.timeout_s is not None:
            self.due[ref] = time.monotonic() + self.timeout_s

    def back(self, ref: Any) -> InFlight:
        """The chunk of the call ``ref``, which came back."""
        self.due.pop(ref, None)
        return self.inflight.pop(ref)

    def overdue(self, now: float) -> list[InFlight]:
        """The chunks past their deadline, each reported once."""
        late = [ref for ref, when in self.due.items() if when <= now]
        for ref in late:
            del self.due[ref]
        return [self.inflight[ref] for ref in late]

    def again(self, chunk: int, worker: str, error: str, reason: FailureReason = "play") -> bool:
        """Queue ``chunk`` for another play (True), or report its tasks failed with ``reason`` once it
        was played ``max_attempts`` times."""
        if self.attempts[chunk] < self.max_attempts:
            self.pending.appendleft(chunk)
            return True
        why = f"played {self.attempts[chunk]} times without a result; last error: {error}"
        self.failed[chunk] = failures(self.requests[chunk], worker, why, reason)
        return False

    def wait_for_gateway(self, generation: int, back_s: float) -> None:
        """Send no chunk until a gateway newer than ``generation`` is switched in, or ``back_s`` after
        the first chunk found that one silent (once for all of them)."""
        until = self.silent.setdefault(generation, time.monotonic() + back_s)
        self.gateway_wait = (generation, until)

    def fail_pending(self, worker: str, why: str) -> None:
        for chunk in self.pending:
            self.failed[chunk] = failures(self.requests[chunk], worker, why, "worker_lost")
        self.pending.clear()


def failures(
    request: RolloutRequest, worker: str, why: str, reason: FailureReason = "play"
) -> list[EpisodeFailure]:
    """Every task of ``request`` failed, with ``why``."""
    error = " ".join(why.split())[:2000]
    return [EpisodeFailure(task=t, error=error, worker=worker, reason=reason) for t in request.tasks]
