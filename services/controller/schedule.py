"""The controller's step logic as pure functions: plan step k, then complete it (probe stats or not).

The recorded ``StepDecision`` carries the depth that actually ran (``h_roll`` from ``plan``); for
methods without adaptive depth the rest is the depth controller running in shadow.

``plan`` is a pure function of the state after step k-1, so asking twice (e.g. after a controller
restart) gives the same answer; ``complete`` folds step k in exactly once: completing the step the
state already holds returns the stored decision instead of updating twice. Under staleness s
(``lag``) step k is planned from the state after step max(k-1-s, 0) instead, and ``complete`` is
given that state as the ``basis`` (``depth.py`` states the rule).
"""

from collections.abc import Sequence

from services.contracts.controller import DepthState, ProbeStats, StepDecision, StepPlan
from services.contracts.controller_state import ControllerState
from services.contracts.method import Method
from services.controller import depth
from services.controller.blend import blend_alpha
from services.controller.methods import curriculum_depth, switches
from services.errors import ConflictError, InputError
from services.settings.per_service import ControllerServiceSettings


def initial_controller_state(
    run_id: str, method: Method, settings: ControllerServiceSettings
) -> ControllerState:
    return ControllerState(
        run_id=run_id,
        method=method,
        total_steps=settings.steps,
        depth=depth.initial_state(settings.depth),
    )


def step_alpha(state: ControllerState, k: int, settings: ControllerServiceSettings) -> float:
    """The loss-blend alpha of step k under the state's method."""
    match switches(state.method).alpha:
        case "zero":
            return 0.0
        case "one":
            return 1.0
        case "linear":
            if not settings.blend.turn_norm_blend:
                return 0.0
            return blend_alpha(k, state.total_steps, settings.blend.start, settings.blend.end)
        case other:
            raise ValueError(f"unknown alpha mode {other!r}")


def _check_next(state: ControllerState, k: int) -> None:
    if not 1 <= k <= state.total_steps:
        raise InputError(f"step {k} is outside the run's steps 1..{state.total_steps}")
    if k != state.depth.step + 1:
        raise ConflictError(
            f"step {k} does not follow the controller's last completed step {state.depth.step}"
        )


def _check_basis(state: ControllerState, k: int, lag: int) -> None:
    """``state`` must be the state after step max(k-1-lag, 0)."""
    if lag == 0:
        _check_next(state, k)
        return
    if not 1 <= k <= state.total_steps:
        raise InputError(f"step {k} is outside the run's steps 1..{state.total_steps}")
    basis = depth.plan_basis_step(k, lag)
    if state.depth.step != basis:
        raise ConflictError(
            f"under staleness {lag} step {k} is planned from the state after step {basis}, "
            f"not after step {state.depth.step}"
        )


def plan(state: ControllerState, k: int, settings: ControllerServiceSettings, lag: int = 0) -> StepPlan:
    """What to run at step k: probe flag, rollout depth, blend alpha, weights version to roll out with.

    ``state`` is the state after step max(k-1-lag, 0): after step k-1 for the synchronous step. The
    weights are the learner's after that same step (version max(k-1-lag, 0)).
    """
    _check_basis(state, k, lag)
    cfg = settings.depth
    probe = depth.is_probe_step(k, cfg.warmup_steps, cfg.probe_interval)
    h_hat = depth.applied_depth(state.depth.h_bar, cfg.min, cfg.max)
    match switches(state.method).depth:
        case "adaptive":
            h_roll = cfg.max if probe else h_hat
        case "full":
            h_roll = settings.max_turns
        case "curriculum":
            h_roll = curriculum_depth(k, state.total_steps, cfg.min, settings.max_turns)
        case other:
            raise ValueError(f"unknown depth mode {other!r}")
    return StepPlan(
        step=k,
        probe=probe,
        h_roll=h_roll,
        h_hat=h_hat,
        alpha=step_alpha(state, k, settings),
        weights_version=depth.plan_basis_step(k, lag),
    )


def complete(
    state: ControllerState,
    k: int,
    stats: ProbeStats | None,
    settings: ControllerServiceSettings,
    basis: DepthState | None = None,
) -> tuple[ControllerState, StepDecision]:
    """Fold step k into the state; ``stats`` (the uncensored probe batch) is required on probe steps.

    ``basis``: the depth state step k was planned from under staleness (None: ``state``'s own).
    """
    if state.last is not None and state.last.step == k:
        return state, state.last  # already completed: idempotent retry
    _check_next(state, k)
    if stats is not None and stats.step != k:
        raise InputError(f"probe statistics are for step {stats.step}, not step {k}")
    if basis is None:
        planned = plan(state, k, settings)
    else:
        planned = plan(state.model_copy(update={"depth": basis}), k, settings, lag=k - 1 - basis.step)
    if switches(state.method).depth == "curriculum":
        # Curriculum batches are censored by design: the depth controller neither probes nor updates.
        decision = StepDecision(
            step=k,
            probe=False,
            h_roll=planned.h_roll,
            h_hat=planned.h_hat,
            h_bar=state.depth.h_bar,
            h_eff=state.depth.h_eff,
            h_cov=state.depth.h_cov,
            h_ctrl=state.depth.h_ctrl,
            planned_from=None if basis is None else basis.step,
        )
    else:
        decision = depth.step(state.depth, k, stats if planned.probe else None, settings.depth, basis)
        decision = decision.model_copy(update={"h_roll": planned.h_roll})
    new_state = state.model_copy(
        update={
            "depth": depth.state_after(decision),
            "probes": state.probes + int(decision.probe),
            "last": decision,
        }
    )
    return new_state, decision


def state_at(
    current: ControllerState,
    decisions: Sequence[StepDecision],
    step: int,
    settings: ControllerServiceSettings,
) -> ControllerState:
    """The state right after ``step``, rebuilt from the recorded decisions of steps 1..step."""
    if step == 0:
        return initial_controller_state(current.run_id, current.method, settings)
    if len(decisions) < step or decisions[step - 1].step != step:
        raise InputError(f"no recorded decision for step {step}; cannot rebuild the controller state")
    kept = decisions[:step]
    return current.model_copy(
        update={
            "depth": depth.state_after(kept[-1]),
            "probes": sum(d.probe for d in kept),
            "last": kept[-1],
        }
    )


def basis_state(
    current: ControllerState,
    decisions: Sequence[StepDecision],
    k: int,
    lag: int,
    settings: ControllerServiceSettings,
) -> ControllerState:
    """The state step k is planned from under staleness ``lag``: the state after step max(k-1-lag, 0).

    ``current`` itself when it is that state; rebuilt from the recorded ``decisions`` when the
    controller has already completed later steps. Never a guess: a ConflictError if that step is
    not completed yet (the caller waits for its ingest).
    """
    basis = depth.plan_basis_step(k, lag)
    if current.depth.step == basis:
        return current
    if current.depth.step < basis:
        raise ConflictError(
            f"under staleness {lag} step {k} is planned from the state after step {basis}, but the "
            f"controller has completed step {current.depth.step} only; ingest step {basis} first"
        )
    return state_at(current, decisions, basis, settings)
