"""The run's result: before/after/teacher with Wilson intervals, and the teacher only when comparable."""

import math

import pytest

from services.contracts.orchestrator import EvalRecord
from services.orchestrator.run_result import comparable_measurement, run_result, wilson_interval

WANTED = {
    "env": "alfworld",
    "split": "valid_unseen",
    "games": 60,
    "n": 1,
    "temperature": 0.0,
    "max_turns": 40,
    "seed": 0,
}


def _eval(step: int, rate: float) -> EvalRecord:
    return EvalRecord(
        step=step,
        cumulative_s=10.0 * step,
        split="valid_unseen",
        episodes=60,
        n=1,
        success_rate=rate,
        avg_at_n=rate,
        per_task_type={},
    )


def _measured(**changes: object) -> dict[str, object]:
    return {**WANTED, "success_rate": 0.8, "episodes": 60, "command": "turnopd eval ...", **changes}


def test_wilson_interval_matches_the_closed_form_and_stays_inside_0_1():
    low, high = wilson_interval(30, 60)
    # p = 0.5, n = 60: centre 0.5, half-width z*sqrt(0.25/60 + z^2/14400)/(1 + z^2/60)
    z = 1.959963984540054
    half = z * math.sqrt(0.25 / 60 + z * z / (4 * 3600)) / (1 + z * z / 60)
    assert low == pytest.approx(0.5 - half) and high == pytest.approx(0.5 + half)
    assert (low, high) == (pytest.approx(0.3773, abs=1e-4), pytest.approx(0.6227, abs=1e-4))
    assert wilson_interval(0, 60)[0] == 0.0 and wilson_interval(0, 60)[1] == pytest.approx(0.0602, abs=1e-3)
    assert wilson_interval(60, 60)[1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least one trial"):
        wilson_interval(0, 0)


def test_before_is_step_0_after_is_the_last_and_the_ratio_is_against_the_teacher():
    result = run_result([_eval(16, 0.6), _eval(0, 0.1), _eval(8, 0.4)], [40, 30], _measured(), WANTED)
    assert result.before is not None and result.before.rate == 0.1
    assert result.after is not None and result.after.rate == 0.6 and result.after.label.endswith("step 16")
    assert result.teacher is not None and result.teacher.rate == 0.8
    assert result.student_over_teacher == pytest.approx(0.75)
    assert result.steps == 2 and result.h_hat == [40, 30]


def test_a_teacher_measured_another_way_is_not_shown_and_the_note_says_why():
    ok, note = comparable_measurement(_measured(max_turns=50, seed=1234), WANTED)
    assert not ok
    assert "max_turns 50 (run: 40)" in note and "seed 1234 (run: 0)" in note
    result = run_result([_eval(0, 0.1)], [], _measured(max_turns=50), WANTED)
    assert result.teacher is None and result.after is None and result.student_over_teacher is None
    assert "not a shipped model" in comparable_measurement(None, WANTED)[1]


def test_without_a_step_0_evaluation_before_comes_from_the_students_manifest_when_comparable():
    student = {**_measured(), "success_rate": 1 / 60}
    result = run_result([_eval(16, 0.6)], [40], _measured(), WANTED, student)
    assert result.before is not None and result.before.rate == pytest.approx(1 / 60)
    assert result.before.label == "student before training (its shipped manifest)"
    measured_before = run_result([_eval(0, 0.1), _eval(16, 0.6)], [40], _measured(), WANTED, student)
    assert measured_before.before is not None and measured_before.before.rate == 0.1  # the run's own wins
    elsewhere = run_result([_eval(16, 0.6)], [40], _measured(), WANTED, {**student, "max_turns": 50})
    assert elsewhere.before is None


def test_the_curve_lists_every_evaluation_in_step_order_and_climbed_compares_the_intervals():
    result = run_result([_eval(16, 0.6), _eval(0, 0.1), _eval(8, 0.4)], [40, 30], _measured(), WANTED)
    assert [(step, s.label, s.rate) for step, s in result.curve] == [
        (0, "before", 0.1),
        (8, "after step 8", 0.4),
        (16, "after step 16", 0.6),
    ]
    # 6/60 -> [0.047, 0.201]; 36/60 -> [0.474, 0.713]: wholly above
    assert result.climbed is True
    # 6/60 against 10/60 -> [0.093, 0.281]: the intervals overlap
    assert run_result([_eval(0, 0.1), _eval(8, 10 / 60)], [40], _measured(), WANTED).climbed is False
    # no "before": neither the run's step 0 nor a comparable manifest
    alone = run_result([_eval(8, 0.4)], [40], _measured(), WANTED)
    assert alone.climbed is None and [(step, s.label) for step, s in alone.curve] == [(8, "after step 8")]
