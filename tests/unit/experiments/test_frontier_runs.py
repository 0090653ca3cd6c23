"""The frontier page's per-run table on hand-made runs: every cell traced to the series below."""

import dataclasses

import pytest
from comparison_logs import run_logs, step_metrics

from services.errors import InputError
from services.experiments.frontier_runs import RunPoint, run_row, run_rows, runs_table


def test_a_row_reads_the_runs_points_and_step_costs():
    # 3 steps of 10 s each (60% rollout, 20% learner, 100 tokens), depths 40, 40 and 25.
    logs = run_logs("turnopd", 1, 10.0, [0.25, 0.5, 0.5, 0.75])
    logs = dataclasses.replace(
        logs, metrics=[step_metrics(k, 10.0, "turnopd", h_roll=h) for k, h in ((1, 40), (2, 40), (3, 25))]
    )
    row = run_row(logs)
    assert (row.method, row.seed, row.steps) == ("turnopd", 1, 3)
    assert row.points == [
        RunPoint(0, 0.25, 0.0),
        RunPoint(1, 0.5, 10.0),
        RunPoint(2, 0.5, 20.0),
        RunPoint(3, 0.75, 30.0),
    ]
    assert row.wall_s == pytest.approx(30.0)
    assert row.mean_h_roll == pytest.approx(35.0)
    assert row.rollout_share == pytest.approx(0.6)
    assert row.learner_ms_per_token == pytest.approx(1000.0 * 2.0 / 100)  # 2 s of learner per 100 tokens


def test_rows_keep_the_method_order_and_sort_seeds():
    runs = [
        run_logs("turnopd", 2, 5.0, [0.0, 0.5]),
        run_logs("vanilla", 0, 10.0, [0.0, 0.25]),
        run_logs("turnopd", 0, 5.0, [0.0, 0.75]),
    ]
    assert [(r.method, r.seed) for r in run_rows(runs)] == [("turnopd", 0), ("turnopd", 2), ("vanilla", 0)]


def test_the_table_has_a_column_per_evaluated_step_and_a_dash_where_a_run_has_no_point():
    short = run_logs("vanilla", 0, 10.0, [0.25, 0.5])
    longer = run_logs("turnopd", 0, 5.0, [0.25, 0.5, 0.75])
    table = runs_table(run_rows([longer, short]))
    assert table.header[:4] == ["Run", "step 0", "step 1", "step 2"]
    assert table.rows[0][:4] == ["turnopd seed 0", "25.0", "50.0 (5 s)", "75.0 (10 s)"]
    assert table.rows[1][:4] == ["vanilla seed 0", "25.0", "50.0 (10 s)", "-"]
    assert table.rows[0][4:] == ["10.0 s (2 steps)", "6.0", "60.0%", "10.00"]


def test_a_run_without_steps_is_refused_by_name():
    logs = dataclasses.replace(run_logs("vanilla", 3, 10.0, [0.5]), metrics=[])
    with pytest.raises(InputError, match="runs/vanilla/seed3: no step"):
        run_row(logs)


def test_a_run_that_trained_no_token_has_no_learner_pace():
    logs = run_logs("vanilla", 0, 10.0, [0.0, 0.5])
    logs = dataclasses.replace(logs, metrics=[step_metrics(1, 10.0).model_copy(update={"tokens": 0})])
    assert run_row(logs).learner_ms_per_token is None
