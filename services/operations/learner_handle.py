"""The learner as the step pipeline sees it: one handle for the whole run, valid across `turnopd
restart learner` (which retires the trainer behind it and attaches a new one between steps)."""

import threading
from collections.abc import Callable
from typing import Any

from services.contracts.learner import LearnerBatch, LearnerStepResult
from services.learner.service import Learner


class LearnerHandle:
    def __init__(self, learner: Learner) -> None:
        self._learner = learner
        self._every = [learner]  # every trainer attached, each closed by the run's end
        self._lock = threading.Lock()
        self._before_close: list[Callable[[], None]] = []

    @property
    def current(self) -> Learner:
        with self._lock:
            return self._learner

    @property
    def resumed_step(self) -> int:
        return self.current.resumed_step

    @property
    def alive(self) -> bool:
        return self.current.alive

    @property
    def world(self) -> int:
        return self.current.world

    @property
    def solo(self) -> bool:
        """The learner runs as one plain actor, without Ray Train (``services.learner.solo_worker``)."""
        return self.current.solo

    def step(self, batch: LearnerBatch) -> tuple[LearnerStepResult, Any]:
        return self.current.step(batch)

    def checkpoint(self, step: int) -> None:
        self.current.checkpoint(step)

    def keep_before_close(self, keep: Callable[[], None]) -> None:
        """Run ``keep`` before a trainer is retired: whoever holds weights its rank 0 put in the object
        store (they go with it) copies them into objects the driver owns."""
        self._before_close.append(keep)

    def retire(self) -> None:
        """Let every holder keep what it needs, then close the trainer (a replacement attaches the next).

        Newest holder first: the pipeline's lanes (registered after the pool) may be publishing a
        version into the pool right now; their keep waits for that publish, so the pool's keep, run
        last, copies whatever the pool holds by then (issue 38: a learner restart during a resize)."""
        for keep in reversed(self._before_close):
            keep()
        self.current.close()

    def attach(self, learner: Learner) -> None:
        with self._lock:
            self._learner = learner
            self._every.append(learner)

    def close(self) -> None:
        """At the run's end: close the trainer, and any attached since that a failed replacement
        left behind (closing a closed one does nothing)."""
        for learner in reversed(self._every):
            learner.close()
