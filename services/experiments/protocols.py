"""The paper's evaluation protocols over a comparison's run logs (pure).

* A run's *window score* at a cutoff is the mean and population std of its last ``window`` (4)
  evaluation points (each an Avg@n over the validation games) whose step is <= K and, for
  Least-Time, whose cumulative step wall time is <= the cutoff. The evaluation before step 1
  (``eval.at_start``) is a point like any other.
* *Same-Step*: cutoff at step K. *Least-Time*: per seed, the cutoff is T*_s = min over methods of
  the cumulative wall time at step K (runs of one seed play the same tasks, so they are compared
  with each other).
* Wall time is ``metrics.jsonl``'s ``cumulative_s`` at step K (training steps only, evaluation
  excluded); a run's speedup is vanilla's wall time (same seed) over its own.
* Over seeds: accuracies and stds are seed means, ``*_seed_std`` the sample std of the per-seed
  accuracies; a method's speedup is the ratio of seed-mean wall times. A protocol with no point in
  some seed's window is None for the method (never averaged over the seeds that have one).
"""

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from services.contracts.experiments import (
    ComparisonSummary,
    MethodSummary,
    RunScore,
    TaskTypeScore,
    TaskTypeSummary,
    TimeSplit,
    WindowScore,
)
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.errors import InputError

WINDOW = 4
BASELINE = "vanilla"
TURNOPD = "turnopd"  # the method the baseline is set against


@dataclass(frozen=True)
class RunLogs:
    """What the protocols read from one run directory."""

    method: str
    seed: int
    run_dir: str
    metrics: Sequence[StepMetrics]
    evals: Sequence[EvalRecord]


def window_points(
    evals: Sequence[EvalRecord], max_step: int, max_cumulative_s: float | None = None, size: int = WINDOW
) -> list[EvalRecord]:
    """The last ``size`` evaluation points (by step) at or before both cutoffs."""
    kept = [
        e
        for e in evals
        if e.step <= max_step and (max_cumulative_s is None or e.cumulative_s <= max_cumulative_s)
    ]
    return sorted(kept, key=lambda e: e.step)[-size:]


def window_score(points: Sequence[EvalRecord], value: Callable[[EvalRecord], float | None]) -> WindowScore:
    """Mean and population std of ``value`` over the points that have one."""
    scored = [(p.step, v) for p in points if (v := value(p)) is not None]
    if not scored:
        return WindowScore(mean=None, std=None, steps=[])
    values = [v for _, v in scored]
    return WindowScore(
        mean=statistics.fmean(values), std=statistics.pstdev(values), steps=[s for s, _ in scored]
    )


def check_steps(logs: RunLogs, steps: int) -> None:
    """The run logged every step 1..K exactly once (and no evaluation beyond K)."""
    logged = [m.step for m in logs.metrics]
    if logged[:steps] != list(range(1, steps + 1)):
        have = f"{logged[0]}..{logged[-1]} ({len(logged)} lines)" if logged else "none"
        raise InputError(f"{logs.run_dir}: metrics.jsonl must hold steps 1..{steps} once each, has {have}")
    if not any(e.step == steps for e in logs.evals):
        raise InputError(f"{logs.run_dir}: eval.jsonl has no evaluation after step {steps}")


def wall_time_at(metrics: Sequence[StepMetrics], step: int) -> float:
    """Cumulative step wall time after ``step``."""
    for m in metrics:
        if m.step == step:
            return m.cumulative_s
    raise InputError(f"no metrics line for step {step}")


def least_time_cutoffs(walls: Mapping[tuple[str, int], float]) -> dict[int, float]:
    """Per seed, the smallest wall time any method needed for K steps; keys of ``walls``: (method, seed)."""
    cutoffs: dict[int, float] = {}
    for (_method, seed), wall in walls.items():
        cutoffs[seed] = min(wall, cutoffs.get(seed, wall))
    return cutoffs


def _task_value(task_type: str) -> Callable[[EvalRecord], float | None]:
    return lambda e: e.per_task_type.get(task_type)


def score_run(
    logs: RunLogs, steps: int, cutoff_s: float, vanilla_wall_s: float | None, size: int = WINDOW
) -> RunScore:
    """A run's scores under both protocols, its wall time and its speedup. A multi-environment run
    is scored per source (its own evaluation points); its overall score is the sources' mean."""
    check_steps(logs, steps)
    wall = wall_time_at(logs.metrics, steps)
    upto = [m for m in logs.metrics if m.step <= steps]
    envs = sorted({e.env for e in logs.evals if e.env is not None})
    groups = [[e for e in logs.evals if e.env == env] for env in envs] if envs else [list(logs.evals)]
    windows = [(window_points(g, steps, None, size), window_points(g, steps, cutoff_s, size)) for g in groups]
    scores = [
        TaskTypeScore(same_step=window_score(same, _avg), least_time=window_score(least, _avg))
        for same, least in windows
    ]
    per_task_type = {}
    for group, (same, least) in zip(groups, windows, strict=True):
        for t in sorted({t for e in group if e.step <= steps for t in e.per_task_type}):
            per_task_type[t] = TaskTypeScore(
                same_step=window_score(same, _task_value(t)), least_time=window_score(least, _task_value(t))
            )
    return RunScore(
        seed=logs.seed,
        run_dir=logs.run_dir,
        wall_time_s=wall,
        time_split=TimeSplit(
            rollout_s=sum(m.times.rollout_s for m in upto),
            teacher_s=sum(m.times.teacher_s for m in upto),
            learner_s=sum(m.times.learner_s for m in upto),
            other_s=sum(m.times.other_s for m in upto),
        ),
        mean_h_roll=statistics.fmean(m.h_roll for m in upto),
        least_time_cutoff_s=cutoff_s,
        speedup_vs_vanilla=None if vanilla_wall_s is None or wall == 0.0 else vanilla_wall_s / wall,
        same_step=mean_of([s.same_step for s in scores]),
        least_time=mean_of([s.least_time for s in scores]),
        per_task_type=dict(sorted(per_task_type.items())),
        per_env=dict(zip(envs, scores, strict=True)) if envs else {},
    )


def _avg(e: EvalRecord) -> float | None:
    return e.avg_at_n


def mean_of(scores: Sequence[WindowScore]) -> WindowScore:
    """The sources' mean score (one source: its own); None if a source has none."""
    if len(scores) == 1:
        return scores[0]
    if any(s.mean is None or s.std is None for s in scores):
        return WindowScore(mean=None, std=None, steps=[])
    return WindowScore(
        mean=statistics.fmean(s.mean for s in scores if s.mean is not None),
        std=statistics.fmean(s.std for s in scores if s.std is not None),
        steps=sorted({k for s in scores for k in s.steps}),
    )


def seed_mean(values: Sequence[float | None]) -> float | None:
    """The mean of per-seed values; None if there are none or some seed has none."""
    if not values or any(v is None for v in values):
        return None
    return statistics.fmean(v for v in values if v is not None)


def _seed_std(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.stdev(present) if len(present) == len(values) and len(present) >= 2 else None


def summarise_method(method: str, runs: Sequence[RunScore], vanilla_wall_s: float | None) -> MethodSummary:
    """One method over its seeds (``runs`` in seed order)."""
    same = [r.same_step.mean for r in runs]
    least = [r.least_time.mean for r in runs]
    walls = [r.wall_time_s for r in runs]
    wall = statistics.fmean(walls)
    task_types = sorted({t for r in runs for t in r.per_task_type})
    envs = sorted({env for r in runs for env in r.per_env})

    def group_mean(by: str, key: str, protocol: str, field: str) -> float | None:
        scores = [getattr(r, by).get(key) for r in runs]
        return seed_mean([None if s is None else getattr(getattr(s, protocol), field) for s in scores])

    def summary(by: str, key: str) -> TaskTypeSummary:
        return TaskTypeSummary(
            same_step_acc=group_mean(by, key, "same_step", "mean"),
            same_step_std=group_mean(by, key, "same_step", "std"),
            least_time_acc=group_mean(by, key, "least_time", "mean"),
            least_time_std=group_mean(by, key, "least_time", "std"),
        )

    return MethodSummary(
        method=method,
        seeds=[r.seed for r in runs],
        same_step_acc=seed_mean(same),
        same_step_std=seed_mean([r.same_step.std for r in runs]),
        same_step_seed_std=_seed_std(same),
        least_time_acc=seed_mean(least),
        least_time_std=seed_mean([r.least_time.std for r in runs]),
        least_time_seed_std=_seed_std(least),
        wall_time_s=wall,
        wall_time_seed_std=_seed_std(walls),
        speedup_vs_vanilla=None if vanilla_wall_s is None or wall == 0.0 else vanilla_wall_s / wall,
        per_task_type={t: summary("per_task_type", t) for t in task_types},
        per_env={env: summary("per_env", env) for env in envs},
        runs=list(runs),
    )


def summarise(
    runs: Sequence[RunLogs],
    steps: int,
    *,
    window: int = WINDOW,
    baseline: str = BASELINE,
    config: str | None = None,
) -> ComparisonSummary:
    """The whole comparison; ``runs`` must hold every (method, seed) pair exactly once."""
    if not runs:
        raise InputError("no runs to summarise")
    methods = list(dict.fromkeys(r.method for r in runs))
    seeds = sorted({r.seed for r in runs})
    grid = {(r.method, r.seed): r for r in runs}
    if len(grid) != len(runs):
        raise InputError("a (method, seed) pair appears more than once")
    missing = [f"{m} seed {s}" for m in methods for s in seeds if (m, s) not in grid]
    if missing:
        raise InputError(f"every method needs every seed; missing: {', '.join(missing)}")
    for r in runs:
        check_steps(r, steps)
    walls = {key: wall_time_at(r.metrics, steps) for key, r in grid.items()}
    cutoffs = least_time_cutoffs(walls)
    has_baseline = baseline in methods
    per_method = {}
    for m in methods:
        scores = [
            score_run(grid[m, s], steps, cutoffs[s], walls[baseline, s] if has_baseline else None, window)
            for s in seeds
        ]
        base = statistics.fmean(walls[baseline, s] for s in seeds) if has_baseline else None
        per_method[m] = summarise_method(m, scores, base)
    return ComparisonSummary(
        steps=steps,
        window=window,
        baseline=baseline,
        seeds=seeds,
        least_time_cutoff_s={str(s): c for s, c in cutoffs.items()},
        config=config,
        methods=per_method,
    )
