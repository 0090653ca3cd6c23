"""A reproduction against its record: equal fields pass, any change is named with its step."""

import pytest
from comparison_logs import run_logs

from services.experiments.reproduction import differences, largest_relative

RECORD = run_logs("turnopd", 0, 10.0, [0.0, 0.25, 0.5, 0.5, 0.75])  # 4 steps, evaluated after each


def logs(metrics=RECORD.metrics, evals=RECORD.evals):  # type: ignore[no-untyped-def]
    return (list(metrics), list(evals))


def test_the_same_logs_on_a_slower_machine_reproduce():
    slower = [m.model_copy(update={"cumulative_s": 3 * m.cumulative_s}) for m in RECORD.metrics]
    assert differences(logs(), logs(metrics=slower), steps=4) == []
    assert differences(logs(), logs(metrics=slower[:2], evals=RECORD.evals[:3]), steps=2) == []


def test_a_changed_number_is_named_with_its_step_and_both_values():
    kl = [m.model_copy(update={"mean_kl": 0.5 + 1e-7}) if m.step == 3 else m for m in RECORD.metrics]
    [d] = differences(logs(), logs(metrics=kl), steps=4)
    assert (d.file, d.step, d.field, d.recorded, d.reproduced) == (
        "metrics.jsonl",
        3,
        "mean_kl",
        0.5,
        0.5 + 1e-7,
    )
    assert largest_relative([d]) == {"mean_kl": pytest.approx(2e-7, rel=1e-3)}
    assert differences(logs(), logs(metrics=kl), steps=4, rel_tol=1e-6) == []
    assert differences(logs(), logs(metrics=kl), steps=2) == []  # step 3 not asked for


def test_a_changed_evaluation_or_a_missing_step_is_named():
    other = [
        e.model_copy(update={"per_task_type": {"a": 0.5, "b": 0.25}}) if e.step == 2 else e
        for e in RECORD.evals
    ]
    [d] = differences(logs(), logs(evals=other), steps=4)
    assert (d.file, d.step, d.field) == ("eval.jsonl", 2, "per_task_type")
    short = differences(logs(), logs(metrics=RECORD.metrics[:3]), steps=4)
    assert [(d.file, d.step, d.field) for d in short] == [("metrics.jsonl", 4, "missing")]
    with pytest.raises(ValueError, match="the record holds 4 of the 6 steps"):
        differences(logs(), logs(), steps=6)
