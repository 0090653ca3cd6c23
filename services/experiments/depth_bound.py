"""What a rollout-depth schedule could save, replayed on full-depth episodes (pure).

The schedules are replayed on vanilla's own episodes, which were played to the turn cap.

**Why a replay is exact for cost.** Cutting an episode at ``H`` turns leaves its first ``H`` turns
as they were: the same policy played them, and the cut comes after. So a full-depth step's
per-turn token counts (``turn_stats.jsonl``) give the tokens of the same step under any depth
cap. The step-cost model of ``step_cost.py`` then gives its seconds at one machine speed.

A schedule's cumulative cost ratio is then vanilla's first ``k`` steps over the schedule's, for
each ``k``. This is the time ratio a depth schedule can reach where it learns per step as vanilla
does. It bounds what depth alone buys on this task and student.

Each schedule is also shown with the share of successful episodes it keeps, those that end within
their step's cap. A cap that cuts successes saves time, but it removes the very completions that
the paper's coverage floor (``H_cov``, the 0.8 quantile of success lengths) exists to keep.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from services.contracts.orchestrator import StepMetrics
from services.contracts.records import TurnStatsRecord
from services.controller.depth import applied_depth, is_probe_step
from services.errors import InputError
from services.experiments.step_cost import StepCostModel


@dataclass(frozen=True)
class Schedule:
    """A named depth cap per step (index 0: step 1)."""

    name: str
    caps: list[int]


@dataclass(frozen=True)
class Replay:
    """One schedule over one full-depth run: the cumulative cost ratio at each ``k``, and the share
    of that run's successful episodes the caps keep (over all its steps)."""

    schedule: str
    ratios: dict[int, float]
    successes_kept: float | None  # None: the run has no successful episode


def capped_tokens(record: TurnStatsRecord, cap: int) -> int:
    """The step's supervised tokens had every episode been cut after ``cap`` turns."""
    return sum(sum(t.turn_tokens[:cap]) for t in record.trajectories)


def step_seconds(model: StepCostModel, record: TurnStatsRecord, cap: int) -> float:
    """The step's seconds at speed 1 under ``cap``."""
    return model.step_seconds(capped_tokens(record, cap), len(record.trajectories))


def full_depth(records: Sequence[TurnStatsRecord]) -> list[TurnStatsRecord]:
    """``records`` in step order, checked to be a full-depth run: steps 1..K, none truncated below a
    cap of its own (each step at the run's largest ``h_roll``)."""
    ordered = sorted(records, key=lambda r: r.step)
    if not ordered:
        raise InputError("a replay needs a run's turn statistics; got none")
    if [r.step for r in ordered] != list(range(1, len(ordered) + 1)):
        raise InputError(f"a replay needs steps 1..K each once; got steps {[r.step for r in ordered]}")
    cap = max(r.h_roll for r in ordered)
    short = [r.step for r in ordered if r.h_roll < cap]
    if short:
        raise InputError(
            f"a replay needs a full-depth run (vanilla); steps {short} were cut below {cap} turns"
        )
    return ordered


def replay(
    model: StepCostModel, records: Sequence[TurnStatsRecord], schedule: Schedule, ks: Sequence[int]
) -> Replay:
    """``schedule`` over the full-depth run ``records``: vanilla's first k steps over the schedule's."""
    run = full_depth(records)
    if len(schedule.caps) < len(run):
        raise InputError(f"schedule {schedule.name!r} has {len(schedule.caps)} caps for {len(run)} steps")
    cap_max = max(r.h_roll for r in run)
    full = [step_seconds(model, r, cap_max) for r in run]
    capped = [step_seconds(model, r, c) for r, c in zip(run, schedule.caps, strict=False)]
    ratios = {k: sum(full[:k]) / sum(capped[:k]) for k in ks if 0 < k <= len(run) and sum(capped[:k]) > 0.0}
    wins = [
        (len(t.turn_tokens), c)
        for r, c in zip(run, schedule.caps, strict=False)
        for t in r.trajectories
        if t.success
    ]
    kept = None if not wins else sum(turns <= c for turns, c in wins) / len(wins)
    return Replay(schedule=schedule.name, ratios=ratios, successes_kept=kept)


def as_run(name: str, metrics: Sequence[StepMetrics]) -> Schedule:
    """The caps a run actually played (its ``h_roll`` per step)."""
    return Schedule(name, [m.h_roll for m in sorted(metrics, key=lambda m: m.step)])


def probe_steps(steps: int, warmup: int, interval: int) -> list[bool]:
    """Algorithm 1's probe flags for steps 1..``steps`` (the controller's ``is_probe_step``)."""
    return [is_probe_step(k, warmup, interval) for k in range(1, steps + 1)]


def fixed_cap(name: str, cap: int, cap_max: int, probes: Sequence[bool]) -> Schedule:
    """``cap`` on every step but the probes, which play to ``cap_max``."""
    return Schedule(name, [cap_max if p else cap for p in probes])


def without_lag(name: str, metrics: Sequence[StepMetrics], h_min: int, cap_max: int) -> Schedule:
    """A run's own probes and controller targets with no smoothing (``ema_alpha`` 1): after each
    probe, the cap is that probe's ``H_ctrl`` + 1 (clipped to ``h_min``..``cap_max``) until the next."""
    caps, current = [], cap_max
    for m in sorted(metrics, key=lambda m: m.step):
        caps.append(cap_max if m.probe else current)
        if m.probe and m.h_ctrl is not None:
            current = applied_depth(m.h_ctrl, h_min, cap_max)  # H_bar = H_ctrl under ema_alpha 1
    return Schedule(name, caps)
