"""The result of a training run in a few numbers: the student before and after, against the teacher.

Pure module. Success rates come with a 95% Wilson interval over the evaluation's episodes: on 60
games, one game is 1.7 points and the interval around 50% is about +-12 points, so differences
smaller than that are noise. The teacher's success is read from its shipped manifest and shown
only when it was measured on the same games the same way (split, games, samples, temperature,
turn cap, seed); otherwise the result says why it is missing.
"""

import math
from dataclasses import dataclass
from typing import Any

from services.contracts.orchestrator import EvalRecord

Z95 = 1.959963984540054


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (exact at 0 and 1 successes, unlike p +- z*se)."""
    if trials <= 0:
        raise ValueError("an interval needs at least one trial")
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Score:
    """A success rate measured on ``episodes`` episodes, with its 95% interval."""

    label: str
    rate: float
    episodes: int

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(round(self.rate * self.episodes), self.episodes)


@dataclass(frozen=True)
class RunResult:
    before: Score | None
    after: Score | None
    teacher: Score | None
    teacher_note: str  # where the teacher's number comes from, or why there is none
    h_hat: list[int]
    steps: int
    # every evaluation of the run as (step, score) in step order, "before" (step 0) first when known
    curve: tuple[tuple[int, Score], ...] = ()

    @property
    def climbed(self) -> bool | None:
        """Whether the "after" interval lies wholly above the "before" one (None: one is missing)."""
        if self.before is None or self.after is None:
            return None
        return self.after.interval[0] > self.before.interval[1]

    @property
    def student_over_teacher(self) -> float | None:
        if self.after is None or self.teacher is None or self.teacher.rate == 0:
            return None
        return self.after.rate / self.teacher.rate


def comparable_measurement(measured: dict[str, Any] | None, wanted: dict[str, Any]) -> tuple[bool, str]:
    """Whether a manifest's ``measured`` entry used the evaluation ``wanted`` describes; and a note."""
    if measured is None:
        return False, "the teacher has no measured success (not a shipped model)"
    differing = [f"{k} {measured.get(k)!r} (run: {v!r})" for k, v in wanted.items() if measured.get(k) != v]
    if differing:
        return False, "the teacher was measured on other games or settings: " + ", ".join(differing)
    return True, f"the teacher's shipped manifest: `{measured['command']}`"


def run_result(
    evals: list[EvalRecord],
    h_hat: list[int],
    teacher_measured: dict[str, Any] | None,
    eval_settings: dict[str, Any],
    student_measured: dict[str, Any] | None = None,
) -> RunResult:
    """Before = the evaluation at step 0, else the starting student's shipped manifest when it was
    measured on the same games the same way (greedy: the same weights give the same games); after =
    the last evaluation; the teacher when comparable."""
    ordered = sorted(evals, key=lambda e: e.step)
    first = ordered[0] if ordered and ordered[0].step == 0 else None
    last = ordered[-1] if ordered and ordered[-1].step > 0 else None
    ok, note = comparable_measurement(teacher_measured, eval_settings)
    teacher = None
    if ok and teacher_measured is not None:
        teacher = Score("teacher", float(teacher_measured["success_rate"]), int(teacher_measured["episodes"]))
    before = Score("student before training", first.success_rate, first.episodes) if first else None
    shipped, _ = comparable_measurement(student_measured, eval_settings)
    if before is None and shipped and student_measured is not None:
        before = Score(
            "student before training (its shipped manifest)",
            float(student_measured["success_rate"]),
            int(student_measured["episodes"]),
        )
    after = Score(f"student after step {last.step}", last.success_rate, last.episodes) if last else None
    curve = [
        (e.step, Score(f"after step {e.step}", e.success_rate, e.episodes)) for e in ordered if e.step > 0
    ]
    if before is not None:
        curve.insert(0, (0, Score("before", before.rate, before.episodes)))
    return RunResult(
        before=before,
        after=after,
        teacher=teacher,
        teacher_note=note,
        h_hat=h_hat,
        steps=len(h_hat),
        curve=tuple(curve),
    )
