"""Diagnostic replay: run the depth controller over logged probe snapshots (paper Fig. 'replay')."""

from collections.abc import Iterator, Mapping

from services.contracts.controller import ProbeStats, StepDecision
from services.controller import depth
from services.errors import InputError
from services.settings.tree import DepthSettings


def replay(
    snapshots: Mapping[int, ProbeStats], total_steps: int, settings: DepthSettings
) -> Iterator[StepDecision]:
    """Yield the controller's decision for steps 1..total_steps; a probe step without a snapshot is an error."""
    if total_steps < 1:
        raise InputError(f"steps must be >= 1, got {total_steps}")
    state = depth.initial_state(settings)
    for k in range(1, total_steps + 1):
        probe = depth.is_probe_step(k, settings.warmup_steps, settings.probe_interval)
        stats = snapshots.get(k)
        if probe and stats is None:
            raise InputError(f'step {k} is a probe step but the snapshots have no line with "step": {k}')
        decision = depth.step(state, k, stats if probe else None, settings)
        state = depth.state_after(decision)
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
