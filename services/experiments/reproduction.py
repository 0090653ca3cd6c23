"""Does a run reproduce a recorded one? Its first steps, field by field (issue 62: "the demo and
frontier numbers reproduce: same seeds, same results at s = 0").

At ``max_staleness = 0`` a run is fixed by its settings and seeds: the same tasks, the same samples,
the same updates. A new driver, or any change to the step, must leave the first K steps of a
recorded run as they were: each step's controller state, batch, losses and success
(``metrics.jsonl``), and each evaluation (``eval.jsonl``). Times are the machine's and are not
compared. Only the first steps of a long record need training again: the reproduction stays the
record's run (its step count K too, which the blend's schedule reads) and stops after step k
(``pipeline.train``'s ``stop_after``).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from services.contracts.orchestrator import EvalRecord, StepMetrics

STEP_FIELDS = (
    "probe", "h_roll", "h_hat", "h_bar", "h_eff", "h_cov", "h_ctrl", "alpha", "trajectories",
    "failed_episodes", "tokens", "generated_tokens", "success_rate", "truncated_rate", "mean_turns",
    "loss", "mean_kl", "grad_norm",
)  # fmt: skip
EVAL_FIELDS = ("episodes", "n", "success_rate", "avg_at_n", "per_task_type")


@dataclass(frozen=True)
class Difference:
    file: str  # metrics.jsonl or eval.jsonl
    step: int
    field: str  # "missing": the step is in the record, not in the reproduction
    recorded: Any
    reproduced: Any


def _same(a: Any, b: Any, rel_tol: float) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], rel_tol) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=rel_tol, abs_tol=0.0)
    return bool(a == b)


def _compare(
    file: str, recorded: dict[int, Any], reproduced: dict[int, Any], fields: Sequence[str], rel_tol: float
) -> list[Difference]:
    out = []
    for step, record in sorted(recorded.items()):
        mine = reproduced.get(step)
        if mine is None:
            out.append(Difference(file, step, "missing", "present", None))
            continue
        for name in fields:
            a, b = getattr(record, name), getattr(mine, name)
            if not _same(a, b, rel_tol):
                out.append(Difference(file, step, name, a, b))
    return out


def differences(
    recorded: tuple[Sequence[StepMetrics], Sequence[EvalRecord]],
    reproduced: tuple[Sequence[StepMetrics], Sequence[EvalRecord]],
    steps: int,
    rel_tol: float = 0.0,
) -> list[Difference]:
    """Every field of steps 1..``steps`` and evaluations at steps 0..``steps`` where the reproduction
    differs from the record (floats within ``rel_tol`` count as equal; 0: exactly equal)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    metrics = [{m.step: m for m in run[0] if m.step <= steps} for run in (recorded, reproduced)]
    evals = [{e.step: e for e in run[1] if e.step <= steps} for run in (recorded, reproduced)]
    if len(metrics[0]) < steps:
        raise ValueError(f"the record holds {len(metrics[0])} of the {steps} steps asked for")
    return [
        *_compare("metrics.jsonl", metrics[0], metrics[1], STEP_FIELDS, rel_tol),
        *_compare("eval.jsonl", evals[0], evals[1], EVAL_FIELDS, rel_tol),
    ]


def largest_relative(diffs: Sequence[Difference]) -> dict[str, float]:
    """Per field, the largest relative difference of its numbers (the fields that differ at all)."""
    out: dict[str, float] = {}
    for d in diffs:
        if isinstance(d.recorded, (int, float)) and isinstance(d.reproduced, (int, float)):
            scale = max(abs(d.recorded), abs(d.reproduced))
            rel = abs(d.recorded - d.reproduced) / scale if scale else 0.0
            out[d.field] = max(out.get(d.field, 0.0), rel)
    return out
