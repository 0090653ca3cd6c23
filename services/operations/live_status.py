"""The driver's view of a live run, published to the `run-control` actor for `turnopd status`.

The driver knows what it started, what it restarted and what the pool saw die; `turnopd status`
adds its own pings on top (``services.operations.service_probes``).
"""

import threading
import time
from typing import Any

import ray

from services.contracts.method import Method
from services.contracts.operations import RunPhase, RunStatus
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.operations.pool_load import pool_load
from services.operations.restarts import ServiceRestarts
from services.operations.stack import Stack


class LiveRun:
    """What the driver publishes: progress, last metrics and eval, services; thread-safe."""

    def __init__(
        self,
        stack: Stack,
        restarts: ServiceRestarts,
        control: Any,
        start_step: int,
        method: Method,
        total_steps: int,
    ) -> None:
        self.stack = stack
        self.method, self.total_steps = method, total_steps
        self.restarts = restarts
        self.control = control
        self.steps_done = start_step
        self.phase: RunPhase = "starting"
        self.last: StepMetrics | None = None
        self.last_eval: EvalRecord | None = None
        self.source_evals: dict[str, EvalRecord] = {}  # by env, a multi-environment run's
        self._lock = threading.Lock()

    def step_done(self, metrics: StepMetrics) -> None:
        with self._lock:
            self.steps_done, self.last = metrics.step, metrics
        self.publish()

    def rewound(self, step: int) -> None:
        """The run went back to the checkpoint of ``step`` (a lost learner restarted from it)."""
        with self._lock:
            self.steps_done = step
            if self.last is not None and self.last.step > step:
                self.last = None

    def eval_done(self, record: EvalRecord) -> None:
        with self._lock:
            self.last_eval = record
            if record.env is not None:
                self.source_evals[record.env] = record
        self.publish()

    def set_phase(self, phase: RunPhase) -> None:
        with self._lock:
            self.phase = phase
        self.publish()

    def snapshot(self) -> RunStatus:
        with self._lock:
            last = self.last
            return RunStatus(
                run_id=self.stack.run_id,
                run_dir=str(self.stack.run.root.resolve()),
                method=self.method,
                phase=self.phase,
                step=self.steps_done,
                total_steps=self.total_steps,
                h_hat=last.h_hat if last else None,
                h_bar=last.h_bar if last else None,
                alpha=last.alpha if last else None,
                weights_version=self.stack.pool.weights_version,
                last_step_s=last.times.total_s if last else None,
                pool_load=pool_load([last.times]) if last else None,
                weights_lag=last.weights_lag if last else None,
                last_eval=self.last_eval,
                sources=last.sources if last else None,
                source_evals=list(self.source_evals.values()),
                services=self.restarts.status(self.steps_done),
                restarts=list(self.restarts.history),
                updated_at=time.time(),
            )

    def publish(self) -> None:
        ray.get(self.control.publish.remote(self.snapshot()))
