"""The accuracy-time frontier of TurnOPD against vanilla OPD over seeds (pure; issue 35 item 4).

* **Curves**: a run's evaluation points, Avg@n against ``cumulative_s`` (the sum of the step wall
  times up to the evaluated step; evaluations excluded, as in the protocols).
* **Band**: a method's seeds evaluate at the same steps but at different wall times, so each seed's
  curve is read on one wall-time grid as a *step function*: at time t a seed scores its last
  evaluation at or before t (what a run stopped at t would have measured; nothing is invented
  between evaluations, which linear interpolation would do). The grid is every evaluation time of
  the method's seeds from the latest first evaluation to the earliest last one, so every grid point
  has every seed. The line is the seed mean, the band the seeds' min to max.
* **Time to threshold**: the threshold is 90% of vanilla's final accuracy, i.e. of its Same-Step
  accuracy (mean over seeds, from ``protocols.summarise``). A seed's time is the wall time of its
  first evaluation point (by step) scoring at least the threshold, or not reached. A method's mean
  is over its seeds only when every seed reached the threshold; the ratio vanilla / TurnOPD is the
  ratio of those means.
* **Best student**: per seed, its highest evaluation point (ties: the earliest); a method's best is
  the seed mean of these. The highest of many noisy points is an optimistic estimate, so the
  per-seed points keep their own 95% Wilson intervals.
"""

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from services.contracts.orchestrator import EvalRecord
from services.errors import InputError
from services.experiments.protocols import WINDOW, RunLogs, seed_mean
from services.experiments.report_data import AccuracyCurve, accuracy_curve

REACH_SHARE = 0.9
# Accuracies are fractions of whole games; this keeps 0.9 * 0.5 == 0.45 from failing on float rounding.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Band:
    """A method's seeds on a common wall-time grid: seed mean, min and max at each grid time."""

    method: str
    seeds: int
    wall_s: list[float]
    mean: list[float]
    low: list[float]
    high: list[float]


@dataclass(frozen=True)
class SeedReach:
    """When one seed first scored at least the threshold (None, None: never)."""

    seed: int
    step: int | None
    wall_s: float | None


@dataclass(frozen=True)
class Reach:
    """A method's time to the threshold, per seed and (when every seed reached it) their mean."""

    method: str
    threshold: float
    seeds: list[SeedReach]

    @property
    def reached(self) -> int:
        return sum(s.wall_s is not None for s in self.seeds)

    @property
    def mean_s(self) -> float | None:
        return seed_mean([s.wall_s for s in self.seeds])


@dataclass(frozen=True)
class BestPoint:
    """A seed's highest evaluation point."""

    seed: int
    step: int
    wall_s: float
    avg_at_n: float
    success_rate: float
    episodes: int


def step_value(curve: AccuracyCurve, at_s: float) -> float | None:
    """The curve's last evaluated accuracy at or before ``at_s`` (None before its first point)."""
    value = None
    for wall, acc in zip(curve.wall_s, curve.accuracy, strict=True):
        if wall > at_s + TOLERANCE:
            break
        value = acc
    return value


def common_grid(curves: Sequence[AccuracyCurve]) -> list[float]:
    """Every evaluation time of ``curves`` between the latest first point and the earliest last one."""
    if not curves or any(not c.wall_s for c in curves):
        raise InputError("a band needs at least one curve and an evaluation point in each")
    start = max(c.wall_s[0] for c in curves)
    end = min(c.wall_s[-1] for c in curves)
    return sorted({t for c in curves for t in c.wall_s if start <= t <= end})


def band(method: str, curves: Sequence[AccuracyCurve]) -> Band:
    """The seeds' step-function curves on their common grid: mean, min and max."""
    grid = common_grid(curves)
    rows = [[step_value(c, t) for c in curves] for t in grid]
    values = [[v for v in row if v is not None] for row in rows]
    return Band(
        method=method,
        seeds=len(curves),
        wall_s=grid,
        mean=[statistics.fmean(v) for v in values],
        low=[min(v) for v in values],
        high=[max(v) for v in values],
    )


def seed_reach(seed: int, evals: Sequence[EvalRecord], threshold: float) -> SeedReach:
    """The first evaluation point (by step) with Avg@n >= ``threshold``."""
    for e in sorted(evals, key=lambda e: e.step):
        if e.avg_at_n >= threshold - TOLERANCE:
            return SeedReach(seed=seed, step=e.step, wall_s=e.cumulative_s)
    return SeedReach(seed=seed, step=None, wall_s=None)


def reach(method: str, runs: Sequence[RunLogs], threshold: float) -> Reach:
    return Reach(
        method=method, threshold=threshold, seeds=[seed_reach(r.seed, r.evals, threshold) for r in runs]
    )


def time_ratio(baseline_s: float | None, method_s: float | None) -> float | None:
    """Baseline's time over the method's (None unless both exist and the method's is > 0)."""
    if baseline_s is None or method_s is None or method_s <= 0.0:
        return None
    return baseline_s / method_s


def reach_ratio(baseline: Reach, method: Reach) -> float | None:
    """Baseline's mean time to the threshold over the method's."""
    return time_ratio(baseline.mean_s, method.mean_s)


def best_point(seed: int, evals: Sequence[EvalRecord]) -> BestPoint:
    """The seed's highest Avg@n evaluation point; ties go to the earliest step."""
    if not evals:
        raise InputError(f"seed {seed} has no evaluation point")
    top = min(evals, key=lambda e: (-e.avg_at_n, e.step))
    return BestPoint(
        seed=seed,
        step=top.step,
        wall_s=top.cumulative_s,
        avg_at_n=top.avg_at_n,
        success_rate=top.success_rate,
        episodes=top.episodes,
    )


def late_gain(evals: Sequence[EvalRecord], window: int = WINDOW) -> float | None:
    """Mean of the last ``window`` points minus the mean of the ``window`` before them: near 0 when the
    curve has flattened (None with fewer than 2 * window points)."""
    ordered = sorted(evals, key=lambda e: e.step)
    if len(ordered) < 2 * window:
        return None
    last = ordered[-window:]
    before = ordered[-2 * window : -window]
    return statistics.fmean(e.avg_at_n for e in last) - statistics.fmean(e.avg_at_n for e in before)


def late_slope(evals: Sequence[EvalRecord], window: int = WINDOW) -> float | None:
    """The least-squares slope of Avg@n over the last ``window`` points, per step: how fast the
    curve still climbs at its end (None with fewer than 2 points or all at one step)."""
    last = sorted(evals, key=lambda e: e.step)[-window:]
    if len(last) < 2:
        return None
    mean_step = statistics.fmean(e.step for e in last)
    mean_acc = statistics.fmean(e.avg_at_n for e in last)
    spread = sum((e.step - mean_step) ** 2 for e in last)
    if spread == 0.0:
        return None
    return sum((e.step - mean_step) * (e.avg_at_n - mean_acc) for e in last) / spread


def whole_climb(evals: Sequence[EvalRecord]) -> float | None:
    """(last Avg@n - first) / (last step - first step), in step order; None with fewer than 2 steps."""
    ordered = sorted(evals, key=lambda e: e.step)
    if len(ordered) < 2 or ordered[-1].step == ordered[0].step:
        return None
    return (ordered[-1].avg_at_n - ordered[0].avg_at_n) / (ordered[-1].step - ordered[0].step)


@dataclass(frozen=True)
class LostEpisodes:
    """An evaluation point some of whose episodes could not be played (counted as failures)."""

    seed: int
    step: int
    failed: int
    episodes: int


def lost_episodes(seed: int, evals: Sequence[EvalRecord]) -> list[LostEpisodes]:
    """The points of one run whose ``failed_episodes`` is set, in step order."""
    return [
        LostEpisodes(seed, e.step, e.failed_episodes, e.episodes)
        for e in sorted(evals, key=lambda e: e.step)
        if e.failed_episodes
    ]


@dataclass(frozen=True)
class MethodFrontier:
    """One method's frontier figures over its seeds."""

    method: str
    curves: list[AccuracyCurve]
    band: Band
    reach: Reach | None  # None: no threshold to reach
    best: list[BestPoint]
    late_gain: float | None  # seed mean; None if some seed has too few points
    late_slope: float | None = None  # seed mean, Avg@n per step over the last points; None as above
    whole_climb: float | None = None  # seed mean, Avg@n per step from the first point to the last
    lost: tuple[LostEpisodes, ...] = ()  # points with episodes that could not be played

    @property
    def best_mean(self) -> float:
        return statistics.fmean(b.avg_at_n for b in self.best)


def method_frontier(method: str, runs: Sequence[RunLogs], threshold: float | None) -> MethodFrontier:
    """Band, time to ``threshold`` (None: no threshold), best points and late gain of one method's runs (seed order)."""
    if not runs:
        raise InputError(f"method {method!r} has no runs")
    for r in runs:
        if any(e.env is not None for e in r.evals):
            raise InputError(f"{r.run_dir}: a multi-environment run; the frontier reads one task source")
    gains = [late_gain(r.evals) for r in runs]
    curves = [accuracy_curve(method, r.seed, r.evals) for r in runs]
    return MethodFrontier(
        method=method,
        curves=curves,
        band=band(method, curves),
        reach=None if threshold is None else reach(method, runs, threshold),
        best=[best_point(r.seed, r.evals) for r in runs],
        late_gain=seed_mean(gains),
        late_slope=seed_mean([late_slope(r.evals) for r in runs]),
        whole_climb=seed_mean([whole_climb(r.evals) for r in runs]),
        lost=tuple(x for r in runs for x in lost_episodes(r.seed, r.evals)),
    )


def reach_threshold(baseline_final: float | None, share: float = REACH_SHARE) -> float | None:
    """``share`` of the baseline's final accuracy; None when there is nothing to reach (no final
    accuracy, or 0: every run would reach 90% of 0 at its first evaluation)."""
    if baseline_final is None or baseline_final <= 0.0:
        return None
    return share * baseline_final


def frontiers(runs: Sequence[RunLogs], threshold: float | None) -> dict[str, MethodFrontier]:
    """Every method's frontier, in the order methods first appear in ``runs``, seeds sorted."""
    by_method: dict[str, list[RunLogs]] = {}
    for r in runs:
        by_method.setdefault(r.method, []).append(r)
    return {m: method_frontier(m, sorted(rs, key=lambda r: r.seed), threshold) for m, rs in by_method.items()}
