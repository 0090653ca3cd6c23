"""The paper's loss-allocation diagnosis (Sec. 4.4, Table 'loss-allocation') over a whole run.

Definitions (R = reliable prefix length; thirds from ``reliable_prefix.thirds``):
* deep/shallow raw-KL ratio of a set of steps: mean over steps of (mean K_t over the deep third's turns
  present in the step) divided by the same for the shallow third;
* deep support: mean over steps of the mean of n_t/n_0 over the deep third (0 for turns not reached);
* deep loss budget: mean over steps of the deep third's share of the trajectory-level loss mass
  (``deep_loss_budget_actual``: under each step's actual blended weights);
* phases: with S steps in step order, step i (0-based) is early if i < 0.3 S, mid if i < 0.6 S, else late.
"""

import math
from collections.abc import Sequence
from itertools import pairwise
from statistics import fmean

from services.contracts.diagnosis import DiagnosisReport, PhaseStats, TurnSummary
from services.contracts.records import TurnStatsRecord
from services.diagnostics.reliable_prefix import reliable_prefix_length, support_fractions, thirds
from services.diagnostics.step_stats import StepStats, step_stats
from services.errors import InputError
from services.settings.algorithm import BlendSettings
from services.settings.tree import DiagnosticsSettings

PHASES = ("early", "mid", "late")


def phase_of(index: int, n_steps: int) -> str:
    """early / mid / late for the index-th (0-based) of n_steps steps (exact integer comparison)."""
    if 10 * index < 3 * n_steps:
        return "early"
    if 10 * index < 6 * n_steps:
        return "mid"
    return "late"


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if present else None


def _third_kl(stats: StepStats, turns: range) -> float | None:
    return _mean([stats.kl[t] for t in turns if t < stats.depth])


def _deep_support(stats: StepStats, deep: range) -> float | None:
    if not deep:
        return None
    return fmean(stats.survivors[t] / stats.survivors[0] if t < stats.depth else 0.0 for t in deep)


def _share(shares: list[float], turns: range) -> float | None:
    return sum(shares[t] for t in turns if t < len(shares)) if turns else None


def _ratio(num: float | None, den: float | None) -> float | None:
    """``num / den``, None where it is undefined or overflows (``den`` zero or, as a subnormal KL can
    be, so small that the quotient is not a finite float)."""
    if num is None or den is None or den == 0.0:
        return None
    quotient = num / den
    return quotient if math.isfinite(quotient) else None


def summarise_steps(name: str, steps: Sequence[StepStats], prefix: int) -> PhaseStats:
    """Deep/shallow statistics over a set of steps."""
    shallow, deep = thirds(prefix)
    return PhaseStats(
        name=name,
        n_steps=len(steps),
        first_step=steps[0].step if steps else None,
        last_step=steps[-1].step if steps else None,
        alpha_mean=_mean([s.alpha for s in steps]),
        deep_shallow_kl_ratio=_ratio(
            _mean([_third_kl(s, deep) for s in steps]), _mean([_third_kl(s, shallow) for s in steps])
        ),
        deep_support=_mean([_deep_support(s, deep) for s in steps]),
        deep_loss_budget=_mean([_share(s.share_traj, deep) for s in steps]),
        deep_loss_budget_actual=_mean([_share(s.share_actual, deep) for s in steps]),
        gap_per_turn=[_mean([s.gap(t) if t < s.depth else None for s in steps]) for t in range(prefix)],
    )


def _turn_summaries(stats: Sequence[StepStats], prefix: int, support: list[float]) -> list[TurnSummary]:
    n = len(stats)
    return [
        TurnSummary(
            turn=t,
            reliable=t < prefix,
            support_frac=support[t],
            mean_survivors=sum(s.survivors[t] for s in stats if t < s.depth) / n,
            mean_kl=_mean([s.kl[t] for s in stats if t < s.depth]),
            gap=_mean([s.gap(t) for s in stats if t < s.depth]),
            loss_share=sum(s.share_actual[t] for s in stats if t < s.depth) / n,
            loss_share_traj=sum(s.share_traj[t] for s in stats if t < s.depth) / n,
        )
        for t in range(len(support))
    ]


def diagnose(
    records: Sequence[TurnStatsRecord], blend: BlendSettings, thresholds: DiagnosticsSettings
) -> DiagnosisReport:
    """The full loss-allocation report of a run's turn statistics."""
    if not records:
        raise InputError("no steps to diagnose")
    ordered = sorted(records, key=lambda r: r.step)
    for a, b in pairwise(ordered):
        if a.step == b.step:
            raise InputError(f"step {a.step} appears more than once")
    stats = []
    for record in ordered:
        try:
            stats.append(step_stats(record, blend.min_floor, blend.min_frac))
        except InputError as exc:
            raise InputError(f"step {record.step}: {exc}") from None
    survivors = [s.survivors for s in stats]
    prefix = reliable_prefix_length(
        survivors, thresholds.min_survivors, thresholds.min_survivor_frac, thresholds.min_step_frac
    )
    support = support_fractions(survivors, thresholds.min_survivors, thresholds.min_survivor_frac)
    shallow, deep = thirds(prefix)
    overall = summarise_steps("overall", stats, prefix)
    by_phase = {p: [s for i, s in enumerate(stats) if phase_of(i, len(stats)) == p] for p in PHASES}
    return DiagnosisReport(
        steps=len(stats),
        first_step=stats[0].step,
        last_step=stats[-1].step,
        reliable_prefix=prefix,
        shallow_turns=list(shallow),
        deep_turns=list(deep),
        min_survivors=thresholds.min_survivors,
        min_survivor_frac=thresholds.min_survivor_frac,
        min_step_frac=thresholds.min_step_frac,
        deep_shallow_kl_ratio=overall.deep_shallow_kl_ratio,
        deep_support=overall.deep_support,
        deep_loss_budget=overall.deep_loss_budget,
        deep_loss_budget_actual=overall.deep_loss_budget_actual,
        phases={p: summarise_steps(p, steps, prefix) for p, steps in by_phase.items()},
        per_turn=_turn_summaries(stats, prefix, support),
    )
