"""The frontier page's per-run table (pure): each run's evaluation points and what its steps cost.

Each row is one run (method, seed): the success at every evaluation point with the cumulative step
time it was reached at (the run's accuracy curve), then four facts of its steps 1..K. Three are the
run's score in the comparison summary (``RunScore``): the steps' wall time, the mean rollout depth
(vanilla: always the turn cap) and the rollout's share of the wall time. The fourth is read from its
metrics here:

* ``learner_ms_per_token``: the learner's milliseconds per trained token. Between the seeds of one
  method, whose batches have the same shapes, it reads how fast the machine ran during each run (a
  run in a slower hour reads higher, and its wall times are longer for it). Between methods it also
  differs with the sequences' lengths and padding, so it is no gauge there.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from services.contracts.experiments import ComparisonSummary, RunScore
from services.contracts.orchestrator import StepMetrics
from services.experiments.frontier import MethodFrontier
from services.experiments.report_data import AccuracyCurve
from services.experiments.tables import Table, duration, pct

# (method, seed) -> the run's learner ms per trained token (None: no token was trained on)
LearnerPace = Mapping[tuple[str, int], float | None]


def learner_ms_per_token(metrics: Sequence[StepMetrics]) -> float | None:
    """The learner's milliseconds per trained token over ``metrics``; None when no token was trained."""
    tokens = sum(m.tokens for m in metrics)
    if tokens == 0:
        return None
    return 1000.0 * sum(m.times.learner_s for m in metrics) / tokens


def _runs(
    summary: ComparisonSummary, methods: Mapping[str, MethodFrontier]
) -> list[tuple[str, RunScore, AccuracyCurve]]:
    """Each run's score and curve: methods in the summary's order (first appearance), seeds sorted."""
    out = []
    for name, method in summary.methods.items():
        curves = {c.seed: c for c in methods[name].curves}
        out += [(name, score, curves[score.seed]) for score in method.runs]
    return out


def _rollout_share(score: RunScore) -> float:
    wall = score.wall_time_s
    return 0.0 if wall <= 0.0 else score.time_split.rollout_s / wall


def _point_cells(curve: AccuracyCurve, steps: Sequence[int]) -> list[str]:
    """Avg@n in % at each of ``steps`` with its cumulative seconds (step 0: none; no point: -)."""
    at = dict(zip(curve.steps, zip(curve.accuracy, curve.wall_s, strict=True), strict=True))
    cells = []
    for step in steps:
        if step not in at:
            cells.append("-")
            continue
        acc, wall = at[step]
        cells.append(pct(acc, 1) if step == 0 else f"{pct(acc, 1)} ({wall:,.0f} s)")
    return cells


def runs_table(summary: ComparisonSummary, methods: Mapping[str, MethodFrontier], pace: LearnerPace) -> Table:
    """Avg@n in % at each evaluated step (cumulative step seconds), then each run's step facts."""
    runs = _runs(summary, methods)
    steps = sorted({s for _, _, c in runs for s in c.steps})
    body = []
    for name, score, curve in runs:
        ms = pace[name, score.seed]
        body.append(
            [
                f"{name} seed {score.seed}",
                *_point_cells(curve, steps),
                f"{duration(score.wall_time_s)} ({summary.steps} steps)",
                f"{score.mean_h_roll:.1f}",
                f"{pct(_rollout_share(score), 1)}%",
                "-" if ms is None else f"{ms:.2f}",
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


def runs_json(
    summary: ComparisonSummary, methods: Mapping[str, MethodFrontier], pace: LearnerPace
) -> list[dict[str, Any]]:
    """The table's numbers, one object per run in its order."""
    return [
        {
            "method": name,
            "seed": score.seed,
            "points": [
                {"step": s, "avg_at_n": a, "cumulative_s": w}
                for s, a, w in zip(curve.steps, curve.accuracy, curve.wall_s, strict=True)
            ],
            "steps": summary.steps,
            "wall_s": score.wall_time_s,
            "mean_h_roll": score.mean_h_roll,
            "rollout_share": _rollout_share(score),
            "learner_ms_per_token": pace[name, score.seed],
        }
        for name, score, curve in _runs(summary, methods)
    ]
