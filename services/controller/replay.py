"""Diagnostic replay: run the depth controller over logged probe snapshots (paper Fig. 'replay')."""

from collections.abc import Iterator, Mapping

from services.contracts.controller import ProbeStats, StepDecision
from services.controller import depth
from services.errors import InputError
from services.settings.algorithm import DepthSettings


def replay(
    snapshots: Mapping[int, ProbeStats], total_steps: int, settings: DepthSettings, lag: int = 0
) -> Iterator[StepDecision]:
    """Yield the controller's decision for steps 1..total_steps; a probe step without a snapshot is an error.

    ``lag`` s >= 1 plans step k from the state after step k-1-s (staleness s); 0 is the synchronous rule.
    """
    if total_steps < 1:
        raise InputError(f"steps must be >= 1, got {total_steps}")
    depth.plan_basis_step(1, lag)  # checks the lag
    states = [depth.initial_state(settings)]  # states[j]: after step j
    for k in range(1, total_steps + 1):
        probe = depth.is_probe_step(k, settings.warmup_steps, settings.probe_interval)
        stats = snapshots.get(k)
        if probe and stats is None:
            raise InputError(f'step {k} is a probe step but the snapshots have no line with "step": {k}')
        basis = states[depth.plan_basis_step(k, lag)] if lag else None
        decision = depth.step(states[-1], k, stats if probe else None, settings, basis)
        states.append(depth.state_after(decision))
        yield decision


def unused_snapshot_steps(
    snapshots: Mapping[int, ProbeStats], total_steps: int, settings: DepthSettings
) -> list[int]:
    """Steps that have a snapshot but are not probe steps (or lie beyond total_steps): ignored by replay."""
    return sorted(
        k
        for k in snapshots
        if k > total_steps or not depth.is_probe_step(k, settings.warmup_steps, settings.probe_interval)
    )
