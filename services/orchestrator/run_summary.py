"""Summary of a run directory's logs: time split, pool load, the controller's depths, the evaluations.

Pure module: contracts in, contract out.
"""

from collections.abc import Sequence

from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.contracts.run_summary import PhaseTime, RunSummary, SourceSummary
from services.errors import InputError
from services.operations.pool_load import pool_load

PHASES = ("rollout", "teacher", "learner", "other")


def summarize(metrics: Sequence[StepMetrics], evals: Sequence[EvalRecord]) -> RunSummary:
    """One ``RunSummary`` from ``metrics.jsonl`` and ``eval.jsonl`` records (steps in order)."""
    if not metrics:
        raise InputError("the run has no logged steps yet (metrics.jsonl is empty)")
    steps = [m.step for m in metrics]
    if steps != list(range(1, len(steps) + 1)):
        raise InputError(f"metrics.jsonl steps are not 1..{len(steps)} in order: {steps[:10]}...")
    wall = sum(m.times.total_s for m in metrics)
    seconds = {phase: sum(getattr(m.times, f"{phase}_s") for m in metrics) for phase in PHASES}
    rollout = seconds["rollout"]
    ordered = sorted(evals, key=lambda e: e.step)
    sources = source_summaries(metrics, ordered)
    return RunSummary(
        steps=len(metrics),
        method=metrics[-1].method,
        wall_s=wall,
        mean_step_s=wall / len(metrics),
        time_split={p: PhaseTime(seconds=s, share=s / wall if wall > 0 else 0.0) for p, s in seconds.items()},
        probe_steps=[m.step for m in metrics if m.probe],
        h_roll=[m.h_roll for m in metrics],
        h_hat=[m.h_hat for m in metrics],
        generated_tokens_per_s=sum(m.generated_tokens for m in metrics) / rollout if rollout > 0 else 0.0,
        pool_load=pool_load([m.times for m in metrics]),
        weights_lag=[m.weights_lag for m in metrics],
        evals=ordered,
        success_change=None if sources is not None else success_change(ordered),
        sources=sources,
    )


def success_change(evals: Sequence[EvalRecord]) -> float | None:
    """The last evaluation's success rate minus the first's (None with fewer than two)."""
    return evals[-1].success_rate - evals[0].success_rate if len(evals) >= 2 else None


def source_summaries(
    metrics: Sequence[StepMetrics], evals: Sequence[EvalRecord]
) -> list[SourceSummary] | None:
    """Each source's depths and evaluations (None: a single-source run)."""
    parts = [m.sources for m in metrics]
    if not parts[0]:
        return None
    out = []
    for i, first in enumerate(parts[0]):
        own = [p[i] for p in parts if p is not None]
        mine = [e for e in evals if e.env == first.env]
        out.append(
            SourceSummary(
                env=first.env,
                probe_steps=[m.step for m, s in zip(metrics, own, strict=True) if s.probe],
                h_roll=[s.h_roll for s in own],
                h_hat=[s.h_hat for s in own],
                trajectories=sum(s.trajectories for s in own),
                evals=mine,
                success_change=success_change(mine),
            )
        )
    return out
