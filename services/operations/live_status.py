"""The driver's view of a live run, published to the `run-control` actor for `turnopd status`.

The driver knows what it started, what it restarted and what the pool saw die; `turnopd status`
adds its own pings on top (``services.operations.service_probes``).
"""

import threading
import time
from pathlib import PurePath
from typing import Any

import ray

from services.contracts.operations import RunPhase, RunStatus, ServiceStatus
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.operations.pool_load import pool_load
from services.operations.restarts import ServiceRestarts
from services.operations.stack import Stack
from services.rollout_worker.actor import worker_name
from services.settings.teacher import TeacherSettings


def masked_url(url: str) -> str:
    """A Redis URL without its password."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    return f"{scheme}{sep}***@{rest.rsplit('@', 1)[1]}"


def _replicas(teacher: TeacherSettings) -> str:
    if teacher.autoscaling:
        return f"{teacher.min_replicas}-{teacher.max_replicas} replicas (autoscaling)"
    return f"{teacher.replicas} replica(s)"


def _services(stack: Stack, restarts: ServiceRestarts, step: int) -> list[ServiceStatus]:
    pool = stack.pool
    counts = restarts.counts
    services = [
        ServiceStatus(
            name="controller",
            health="ok",
            restarts=counts["controller"],
            version=f"config {restarts.version('controller')}",
            detail="state in Redis",
        )
    ]
    live = set(pool.live_workers)
    for i in range(pool.size):
        name = worker_name(i)
        services.append(
            ServiceStatus(
                name=name,
                health="ok" if name in live else "down",
                restarts=pool.stats.replacements_by_worker[i] + pool.stats.crashes_by_worker[i],
                version=f"weights {pool.weights_version}, config {restarts.version(name)}",
                detail=f"{pool.stats.crashes_by_worker[i]} crash(es) recovered",
            )
        )
    teacher = restarts.settings["teacher"].teacher
    model = teacher.model or stack.settings.models.teacher
    services.append(
        ServiceStatus(
            name="teacher",
            health="ok",
            restarts=counts["teacher"],
            version=f"{PurePath(model).name}, config {restarts.version('teacher')}",
            detail=f"Serve app 'teacher', {_replicas(teacher)}",
        )
    )
    services.append(
        ServiceStatus(
            name="env-gateway",
            health="ok",
            restarts=counts["env-gateway"],
            version=f"config {restarts.version('env-gateway')}",
            address=stack.env_url,
            detail="local process" if stack.gateway is not None else "external",
        )
    )
    learner_alive = stack.learner.alive
    services.append(
        ServiceStatus(
            name="learner",
            health="ok" if learner_alive else "down",
            restarts=counts["learner"],
            version=f"step {step}, config {restarts.version('learner')}",
            detail=f"Ray Train, {stack.learner.world} worker(s)",
        )
    )
    services.append(
        ServiceStatus(
            name="redis",
            health="ok",
            restarts=counts["redis"],
            version="append-only file" if stack.redis is not None else "external",
            address=masked_url(stack.redis_url),
            detail="embedded redis-server" if stack.redis is not None else "external",
        )
    )
    return services


class LiveRun:
    """What the driver publishes: progress, last metrics and eval, services; thread-safe."""

    def __init__(self, stack: Stack, restarts: ServiceRestarts, control: Any, start_step: int) -> None:
        self.stack = stack
        self.restarts = restarts
        self.control = control
        self.steps_done = start_step
        self.phase: RunPhase = "starting"
        self.last: StepMetrics | None = None
        self.last_eval: EvalRecord | None = None
        self._lock = threading.Lock()

    def step_done(self, metrics: StepMetrics) -> None:
        with self._lock:
            self.steps_done, self.last = metrics.step, metrics
        self.publish()

    def eval_done(self, record: EvalRecord) -> None:
        with self._lock:
            self.last_eval = record
        self.publish()

    def set_phase(self, phase: RunPhase) -> None:
        with self._lock:
            self.phase = phase
        self.publish()

    def snapshot(self) -> RunStatus:
        with self._lock:
            settings, last = self.stack.settings, self.last
            return RunStatus(
                run_id=self.stack.run_id,
                run_dir=str(self.stack.run.root.resolve()),
                method=settings.run.method,
                phase=self.phase,
                step=self.steps_done,
                total_steps=settings.optim.steps,
                h_hat=last.h_hat if last else None,
                h_bar=last.h_bar if last else None,
                alpha=last.alpha if last else None,
                weights_version=self.stack.pool.weights_version,
                last_step_s=last.times.total_s if last else None,
                pool_load=pool_load([last.times]) if last else None,
                weights_lag=last.weights_lag if last else None,
                last_eval=self.last_eval,
                services=_services(self.stack, self.restarts, self.steps_done),
                restarts=list(self.restarts.history),
                updated_at=time.time(),
            )

    def publish(self) -> None:
        ray.get(self.control.publish.remote(self.snapshot()))
