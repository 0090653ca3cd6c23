"""The `controller` Ray actor: a thin shell over the pure schedule, with its state in Redis.

Every completed step is persisted before the call returns, and ``__init__`` reloads the state, so
a restarted actor (Ray restarts it after a crash; `turnopd restart controller` replaces it) resumes
exactly where the old one stopped.

Redis may come back without its last writes. The controller then rebuilds what was lost from the
run's controller.jsonl and its own state (``recovery.rebuild``): when it starts (a resume, a
restart) and when a save or a read of the decisions finds Redis behind it. Each rebuild is a
warning in its log and counts in ``health`` (`turnopd status`, the train console).
"""

import logging
import os
import time
from pathlib import Path
from typing import Any

import ray
import redis

from services.contracts.controller import ProbeStats, StepDecision, StepPlan
from services.contracts.controller_state import ControllerState
from services.contracts.operations import ControllerHealth
from services.controller import depth, schedule
from services.controller.recovery import DecisionLog, rebuild
from services.controller.store import StateStore, StoreBehindError, open_store
from services.errors import ConflictError, InputError, TurnOPDError
from services.ray_names import CONTROLLER_ACTOR as ACTOR_NAME
from services.ray_names import NAMESPACE
from services.ray_session import on_driver_node
from services.service_auth import check_redis_url
from services.settings.per_service import ControllerServiceSettings, ControllersSettings

log = logging.getLogger(__name__)


class ControllerService:
    """Plain-Python controller service (the actor body), testable without Ray.

    ``records``: the run's controller.jsonl for this controller, from which it rebuilds what the
    store lost (None: no run records; a store that lost writes is then a ConflictError).
    """

    def __init__(
        self,
        settings: ControllerServiceSettings,
        run_id: str,
        store: StateStore,
        records: DecisionLog | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.records = records
        self.rebuilt_steps = 0  # steps put back into the store from the run's records
        self.rebuilt_note = ""  # the last rebuild, in words
        self._initial = schedule.initial_controller_state(run_id, settings.method, settings)
        loaded = store.load()
        if loaded is not None and (loaded.method, loaded.total_steps) != (settings.method, settings.steps):
            raise ConflictError(
                f"run {run_id} was started as method={loaded.method} steps={loaded.total_steps}, "
                f"not method={settings.method} steps={settings.steps}"
            )
        restored = self._restore(live=None)
        if restored is not None:
            loaded = restored
        elif loaded is None:
            loaded = self._initial
            store.save(loaded, None, None)
        self.state = loaded

    def plan(self, step: int, lag: int = 0) -> StepPlan:
        """Step k's plan from the state after step max(k-1-lag, 0) (``lag``: the run's staleness s)."""
        if lag == 0:
            return schedule.plan(self.state, step, self.settings)
        return schedule.plan(self._basis(step, lag), step, self.settings, lag)

    def ingest(self, step: int, stats: ProbeStats | None, lag: int = 0) -> StepDecision:
        """Complete step k (probe statistics on probe steps); persisted before returning.

        ``lag`` s >= 1: step k was planned from the state after step max(k-1-s, 0), recorded as the
        decision's ``planned_from``.
        """
        if self.state.last is not None and self.state.last.step == step:
            return self.state.last  # already completed: a retry
        basis = None if lag == 0 else self._basis(step, lag).depth
        new_state, decision = schedule.complete(self.state, step, stats, self.settings, basis)
        if new_state is not self.state:
            stored = stats if decision.probe else None
            try:
                self.store.save(new_state, decision, stored)
            except StoreBehindError:
                self._restore(live=self.state)
                self.store.save(new_state, decision, stored)
            self.state = new_state
        return decision

    def snapshot(self) -> ControllerState:
        return self.state

    def _basis(self, step: int, lag: int) -> ControllerState:
        """The state after step max(step-1-lag, 0); the stored decisions are read only when it lies behind."""
        behind = self.state.depth.step > depth.plan_basis_step(step, lag)
        decisions = self._decisions() if behind else []
        return schedule.basis_state(self.state, decisions, step, lag, self.settings)

    def rewind(self, step: int) -> ControllerState:
        """Go back to the state after ``step`` (a resumed learner restarts there); later steps are forgotten."""
        if step > self.state.depth.step:
            raise ConflictError(
                f"cannot rewind to step {step}: the controller is at step {self.state.depth.step}"
            )
        if step == self.state.depth.step:
            return self.state
        self.state = schedule.state_at(self.state, self._decisions(), step, self.settings)
        self.store.rewind(self.state)
        return self.state

    def _decisions(self) -> list[StepDecision]:
        """The stored decisions through the live state's step; what the store lost is put back first."""
        decisions = self.store.decisions()
        if len(decisions) < self.state.depth.step:
            self._restore(live=self.state)
            decisions = self.store.decisions()
        return decisions

    def _restore(self, live: ControllerState | None) -> ControllerState | None:
        """Put back into the store what it lost, from the run's records and ``live`` (this
        controller's state; None when it starts); the state stored then, or None if nothing was lost."""
        stored = self.store.load()
        logged = self.records.decisions() if self.records is not None else []
        rebuilt = rebuild(stored, self.store.decisions(), logged, live, self._initial, self.settings)
        if rebuilt is None:
            return None
        self.store.restore(rebuilt.state, rebuilt.decisions, stored)
        self.rebuilt_steps += rebuilt.state.depth.step - rebuilt.held
        self.rebuilt_note = rebuilt.describe(self.settings.env)
        log.warning("%s", self.rebuilt_note)
        return rebuilt.state

    def decisions(self) -> list[StepDecision]:
        return self.store.decisions()

    def probes(self) -> dict[int, ProbeStats]:
        return self.store.probes()

    def health(self) -> ControllerHealth:
        """The state's step and H_bar, and whether Redis answers."""
        try:
            self.store.ping()
            redis_ok, error = True, ""
        except redis.exceptions.RedisError as exc:
            redis_ok, error = False, f"{type(exc).__name__}: {exc}"
        now = self.state.depth
        return ControllerHealth(
            step=now.step,
            h_bar=now.h_bar,
            redis_ok=redis_ok,
            redis_error=error,
            pid=os.getpid(),
            rebuilt_steps=self.rebuilt_steps,
            rebuilt=self.rebuilt_note,
        )


class ControllerServices:
    """The run's controllers by env (one, env None, in a single-environment run), each with its own
    state in Redis; ``env`` None picks the only one."""

    def __init__(
        self, settings: ControllersSettings, run_id: str, redis_url: str, decision_log: Path | None
    ) -> None:
        self.by_env = {
            c.env: ControllerService(
                c,
                run_id,
                open_store("redis", redis_url, run_id, c.env),
                DecisionLog(decision_log, c.env) if decision_log is not None else None,
            )
            for c in settings.controllers
        }

    def __call__(self, env: str | None) -> ControllerService:
        if env is None and len(self.by_env) == 1:
            return next(iter(self.by_env.values()))
        try:
            return self.by_env[env]
        except KeyError:
            raise InputError(
                f"no controller for env {env!r}; this run has {sorted(map(str, self.by_env))}"
            ) from None


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=3)
class ControllerActor:
    def __init__(
        self, settings: ControllersSettings, run_id: str, redis_url: str, decision_log: Path | None
    ) -> None:
        self._service = ControllerServices(settings, run_id, redis_url, decision_log)

    def plan(self, step: int, lag: int = 0, env: str | None = None) -> StepPlan:
        return self._service(env).plan(step, lag)

    def ingest(
        self, step: int, stats: ProbeStats | None, lag: int = 0, env: str | None = None
    ) -> StepDecision:
        return self._service(env).ingest(step, stats, lag)

    def snapshot(self, env: str | None = None) -> ControllerState:
        return self._service(env).snapshot()

    def rewind(self, step: int, env: str | None = None) -> ControllerState:
        return self._service(env).rewind(step)

    def decisions(self, env: str | None = None) -> list[StepDecision]:
        return self._service(env).decisions()

    def probes(self, env: str | None = None) -> dict[int, ProbeStats]:
        return self._service(env).probes()

    def health(self) -> ControllerHealth:
        """The first controller's step and H_bar (every controller completes every step), Redis, and
        the steps every controller rebuilt (the last rebuild in words)."""
        services = list(self._service.by_env.values())
        notes = [s.rebuilt_note for s in services if s.rebuilt_note]
        return (
            services[0]
            .health()
            .model_copy(
                update={
                    "rebuilt_steps": sum(s.rebuilt_steps for s in services),
                    "rebuilt": notes[-1] if notes else "",
                }
            )
        )

    def ready(self) -> bool:
        return True


def start_controller(
    settings: ControllersSettings,
    allow_unauthenticated_redis: bool,
    run_id: str,
    redis_url: str,
    decision_log: Path | None = None,
) -> Any:
    """Create (or attach to) the named `controller` actor in namespace `turnopd`.

    A ``redis_url`` beyond the loopback must carry a password unless ``allow_unauthenticated_redis``
    (``[security]``).
    ``decision_log``: the run's controller.jsonl (an absolute path; the actor runs on this node),
    from which the controller rebuilds what Redis lost.
    """
    check_redis_url(redis_url, allow_unauthenticated_redis)
    handle = ControllerActor.options(  # type: ignore[attr-defined]
        name=ACTOR_NAME, namespace=NAMESPACE, get_if_exists=True, **on_driver_node()
    ).remote(settings, run_id, redis_url, decision_log)
    ray.get(handle.ready.remote())
    return handle


def stop_controller(handle: Any, timeout_s: float = 30.0) -> None:
    """Kill the `controller` actor and wait until its name is free, so the next run creates its own."""
    ray.kill(handle, no_restart=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(ACTOR_NAME, namespace=NAMESPACE)
        except ValueError:
            return
        time.sleep(0.1)
    raise TurnOPDError(f"the {ACTOR_NAME!r} actor still exists {timeout_s:.0f} s after it was killed")
