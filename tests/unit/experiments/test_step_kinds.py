"""Full-depth and truncated steps of hand-made runs: every cell traced to the series below."""

import dataclasses

import pytest
from comparison_logs import run_logs, step_metrics

from services.experiments.protocols import summarise
from services.experiments.step_kinds import StepKind, step_kinds, step_kinds_json, step_kinds_table


def _step(step: int, seconds: float, h_roll: int, turns: float, tokens: int):
    return step_metrics(step, seconds, "turnopd", h_roll=h_roll).model_copy(
        update={"mean_turns": turns, "tokens": tokens}
    )


def test_steps_split_by_depth_with_their_means():
    metrics = [
        _step(1, 70.0, 40, 26.0, 13_000),
        _step(2, 50.0, 29, 20.0, 10_000),
        _step(3, 74.0, 40, 25.0, 12_800),
        _step(4, 56.0, 26, 19.0, 9_900),
    ]
    kinds = step_kinds(metrics)
    assert kinds.full == StepKind(steps=2, mean_s=72.0, mean_turns=25.5, mean_tokens=12_900)
    assert kinds.truncated == StepKind(steps=2, mean_s=53.0, mean_turns=19.5, mean_tokens=9_950)
    assert kinds.truncated_over_full == pytest.approx(53.0 / 72.0)
    # every step full depth (vanilla), whatever its probe flag says: no truncated kind, no ratio
    vanilla = step_kinds([m.model_copy(update={"h_roll": 40, "probe": m.step == 1}) for m in metrics])
    assert vanilla.full is not None and vanilla.full.steps == 4
    assert vanilla.truncated is None and vanilla.truncated_over_full is None


def test_the_table_and_json_read_each_run_in_the_summarys_order():
    turnopd = run_logs("turnopd", 0, 10.0, [0.0, 0.5, 0.5, 0.5])  # every step at depth 6 ...
    vanilla = run_logs("vanilla", 0, 10.0, [0.0, 0.25, 0.25, 0.25])
    last = turnopd.metrics[2]
    shorter = last.model_copy(  # ... but step 3, cut at 4
        update={"h_roll": 4, "times": last.times.model_copy(update={"total_s": 5.0}), "tokens": 60}
    )
    turnopd = dataclasses.replace(turnopd, metrics=[*turnopd.metrics[:2], shorter])
    runs = [turnopd, vanilla]
    kinds = {(r.method, r.seed): step_kinds(r.metrics) for r in runs}
    table = step_kinds_table(summarise(runs, 3), kinds)
    assert table.rows == [
        ["turnopd seed 0", "2", "10.0", "3.0", "100", "1", "5.0", "3.0", "60", "0.50"],
        ["vanilla seed 0", "3", "10.0", "3.0", "100", "0", "-", "-", "-", "-"],
    ]
    data = step_kinds_json(kinds)
    assert data[0]["truncated"] == {"steps": 1, "mean_s": 5.0, "mean_turns": 3.0, "mean_tokens": 60}
    assert data[0]["truncated_over_full"] == 0.5 and data[1]["truncated"] is None
