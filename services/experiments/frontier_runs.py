"""The frontier page's per-run table (pure): each run's evaluation points and what its steps cost.

Each row is one run (method, seed): the success at every evaluation point with the cumulative step
time it was reached at, then four facts of its steps read from its metrics:

* ``mean_h_roll``: the mean rollout depth (vanilla: always the turn cap);
* ``rollout_share``: the rollout's seconds over the steps' seconds;
* ``learner_ms_per_token``: the learner's milliseconds per trained token. Between the seeds of one
  method, whose batches have the same shapes, it reads how fast the machine ran during each run (a
  run in a slower hour reads higher, and its wall times are longer for it). Between methods it also
  differs with the sequences' lengths and padding, so it is no gauge there.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from services.errors import InputError
from services.experiments.protocols import RunLogs
from services.experiments.tables import Table, duration, pct


@dataclass(frozen=True)
class RunPoint:
    step: int
    avg_at_n: float
    cumulative_s: float


@dataclass(frozen=True)
class RunRow:
    method: str
    seed: int
    points: list[RunPoint]
    steps: int
    wall_s: float
    mean_h_roll: float
    rollout_share: float
    learner_ms_per_token: float | None  # None: no token was trained on


def run_row(run: RunLogs) -> RunRow:
    if not run.metrics:
        raise InputError(f"{run.run_dir}: no step in its metrics")
    metrics = run.metrics
    wall = sum(m.times.total_s for m in metrics)
    tokens = sum(m.tokens for m in metrics)
    learner = sum(m.times.learner_s for m in metrics)
    return RunRow(
        method=run.method,
        seed=run.seed,
        points=[
            RunPoint(e.step, e.avg_at_n, e.cumulative_s) for e in sorted(run.evals, key=lambda e: e.step)
        ],
        steps=len(metrics),
        wall_s=wall,
        mean_h_roll=sum(m.h_roll for m in metrics) / len(metrics),
        rollout_share=0.0 if wall <= 0.0 else sum(m.times.rollout_s for m in metrics) / wall,
        learner_ms_per_token=None if tokens == 0 else 1000.0 * learner / tokens,
    )


def run_rows(runs: Sequence[RunLogs]) -> list[RunRow]:
    """One row per run, methods in the order they first appear, seeds sorted."""
    order = list(dict.fromkeys(r.method for r in runs))
    return [run_row(r) for r in sorted(runs, key=lambda r: (order.index(r.method), r.seed))]


def _point_cell(point: RunPoint | None) -> str:
    if point is None:
        return "-"
    if point.step == 0:
        return pct(point.avg_at_n, 1)
    return f"{pct(point.avg_at_n, 1)} ({point.cumulative_s:,.0f} s)"


def runs_table(rows: Sequence[RunRow]) -> Table:
    """Avg@n in % at each evaluated step (cumulative step seconds), then each run's step facts."""
    steps = sorted({p.step for r in rows for p in r.points})
    body = []
    for r in rows:
        at = {p.step: p for p in r.points}
        body.append(
            [
                f"{r.method} seed {r.seed}",
                *(_point_cell(at.get(s)) for s in steps),
                f"{duration(r.wall_s)} ({r.steps} steps)",
                f"{r.mean_h_roll:.1f}",
                f"{pct(r.rollout_share, 1)}%",
                "-" if r.learner_ms_per_token is None else f"{r.learner_ms_per_token:.2f}",
            ]
        )
    return Table(
        title="Each run",
        header=[
            "Run",
            *(f"step {s}" for s in steps),
            "Steps' time",
            "Mean H_roll",
            "Rollout share",
            "Learner ms/token",
        ],
        rows=body,
        note="Avg@n in % at each evaluated step, with the cumulative step seconds it was reached at. "
        "Learner ms/token: the learner's milliseconds per trained token; between one method's seeds it "
        "reads how fast the machine ran during each run (a slower hour reads higher), between methods "
        "it also differs with the sequences' lengths and padding.",
    )
