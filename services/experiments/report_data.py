"""Shape run logs into the series the report plots (pure): step x turn grids, phase gaps, controller
traces, accuracy-vs-wall-time curves.

Turn grids hold ``None`` where a step has no value for a turn (no survivor reached it, or the value
was not recorded). The line panels show the reliable turn prefix of the paper's Sec. 4.1 (or every
observed turn when no turn is reliable under the thresholds, which the figure title says).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import fmean

from services.contracts.controller import StepDecision
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.contracts.records import TurnStatsRecord
from services.diagnostics.allocation import PHASES, phase_of
from services.diagnostics.reliable_prefix import reliable_prefix_length
from services.diagnostics.step_stats import StepStats
from services.settings.tree import DiagnosticsSettings


@dataclass(frozen=True)
class TurnGrid:
    """``values[i][t]``: the value at the i-th logged step and 0-based turn t."""

    steps: list[int]
    values: list[list[float | None]]

    @property
    def turns(self) -> int:
        return len(self.values[0]) if self.values else 0

    def column(self, turn: int) -> list[float | None]:
        return [row[turn] for row in self.values]

    def has_values(self) -> bool:
        return any(v is not None for row in self.values for v in row)


@dataclass(frozen=True)
class ShownTurns:
    count: int
    reliable: bool  # False: no reliable prefix under the thresholds, every observed turn is shown


def shown_turns(stats: Sequence[StepStats], thresholds: DiagnosticsSettings) -> ShownTurns:
    """The reliable prefix R if R > 0, else the deepest turn any step reached."""
    prefix = reliable_prefix_length(
        [s.survivors for s in stats],
        thresholds.min_survivors,
        thresholds.min_survivor_frac,
        thresholds.min_step_frac,
    )
    if prefix > 0:
        return ShownTurns(prefix, True)
    return ShownTurns(max((s.depth for s in stats), default=0), False)


def turn_grid(
    stats: Sequence[StepStats], turns: int, value: Callable[[StepStats, int], float | None]
) -> TurnGrid:
    """``value(step_stats, t)`` for turns 0..turns-1 of every step (None past a step's depth)."""
    return TurnGrid(
        steps=[s.step for s in stats],
        values=[[value(s, t) if t < s.depth else None for t in range(turns)] for s in stats],
    )


def kl_grid(stats: Sequence[StepStats], turns: int) -> TurnGrid:
    """Raw per-turn reverse KL K_t."""
    return turn_grid(stats, turns, lambda s, t: s.kl[t])


def loss_share_grid(stats: Sequence[StepStats], turns: int) -> TurnGrid:
    """Each turn's share of the step's loss mass under the weights the step trained with."""
    return turn_grid(stats, turns, lambda s, t: s.share_actual[t])


def entropy_row(record: TurnStatsRecord, turns: int) -> list[float | None]:
    """Token-mean teacher entropy per turn over the trajectories reaching it (None: not recorded)."""
    row: list[float | None] = []
    for t in range(turns):
        reaching = [tr for tr in record.trajectories if len(tr.turn_tokens) > t]
        tokens = sum(tr.turn_tokens[t] for tr in reaching)
        if tokens == 0 or any(tr.turn_entropy_sum is None for tr in reaching):
            row.append(None)
            continue
        row.append(sum(tr.turn_entropy_sum[t] for tr in reaching if tr.turn_entropy_sum is not None) / tokens)
    return row


def entropy_grid(records: Sequence[TurnStatsRecord], turns: int) -> TurnGrid:
    ordered = sorted(records, key=lambda r: r.step)
    return TurnGrid(steps=[r.step for r in ordered], values=[entropy_row(r, turns) for r in ordered])


def smooth(values: Sequence[float | None], window: int) -> list[float | None]:
    """Trailing mean over the last ``window`` steps' present values (None where the step has none)."""
    out: list[float | None] = []
    for i, v in enumerate(values):
        recent = [x for x in values[max(0, i - window + 1) : i + 1] if x is not None]
        out.append(None if v is None else fmean(recent))
    return out


def gap_by_phase(stats: Sequence[StepStats], turns: int) -> dict[str, list[float | None]]:
    """Per phase (early/mid/late by step order), the mean over its steps of G_t = K_t^fail - K_t^succ."""
    ordered = sorted(stats, key=lambda s: s.step)
    out: dict[str, list[float | None]] = {}
    for phase in PHASES:
        members = [s for i, s in enumerate(ordered) if phase_of(i, len(ordered)) == phase]
        row: list[float | None] = []
        for t in range(turns):
            gaps = [g for s in members if t < s.depth and (g := s.gap(t)) is not None]
            row.append(fmean(gaps) if gaps else None)
        out[phase] = row
    return out


@dataclass(frozen=True)
class ControllerTrace:
    steps: list[int]
    h_eff: list[float | None]  # only on probe steps
    h_cov: list[float]
    h_bar: list[float]
    h_hat: list[float]
    h_roll: list[float]
    probe_steps: list[int]


def controller_trace(decisions: Sequence[StepDecision]) -> ControllerTrace:
    """The depth controller over steps as `turnopd controller replay` reports it (0-based turns)."""
    ordered = sorted(decisions, key=lambda d: d.step)
    return ControllerTrace(
        steps=[d.step for d in ordered],
        h_eff=[float(d.h_eff) if d.probe and d.h_eff is not None else None for d in ordered],
        h_cov=[float(d.h_cov) for d in ordered],
        h_bar=[d.h_bar for d in ordered],
        h_hat=[float(d.h_hat) for d in ordered],
        h_roll=[float(d.h_roll) for d in ordered],
        probe_steps=[d.step for d in ordered if d.probe],
    )


@dataclass(frozen=True)
class AccuracyCurve:
    """Validation Avg@n against cumulative step wall time, one point per evaluation."""

    method: str
    seed: int
    wall_s: list[float]
    accuracy: list[float]
    steps: list[int]


def accuracy_curve(method: str, seed: int, evals: Sequence[EvalRecord]) -> AccuracyCurve:
    ordered = sorted(evals, key=lambda e: e.step)
    return AccuracyCurve(
        method=method,
        seed=seed,
        wall_s=[e.cumulative_s for e in ordered],
        accuracy=[e.avg_at_n for e in ordered],
        steps=[e.step for e in ordered],
    )


def step_wall_times(metrics: Sequence[StepMetrics]) -> tuple[list[int], list[float]]:
    """(steps, cumulative wall time) of a run."""
    ordered = sorted(metrics, key=lambda m: m.step)
    return [m.step for m in ordered], [m.cumulative_s for m in ordered]
