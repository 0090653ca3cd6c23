"""The frontier page's per-run table on hand-made runs: every cell traced to the series below."""

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from comparison_logs import run_logs, step_metrics

from services.errors import InputError
from services.experiments.frontier import frontiers
from services.experiments.frontier_runs import learner_ms_per_token, runs_json, runs_table
from services.experiments.protocols import RunLogs, summarise
from services.experiments.tables import Table


def table_and_json(runs: Sequence[RunLogs], steps: int) -> tuple[Table, list[dict[str, Any]]]:
    """The table and its JSON from the runs' summary and curves, as the frontier report holds them."""
    summary = summarise(runs, steps)
    methods = frontiers(runs, None)
    pace = {(r.method, r.seed): learner_ms_per_token(r.metrics) for r in runs}
    return runs_table(summary, methods, pace), runs_json(summary, methods, pace)


def test_a_row_reads_the_runs_points_and_step_costs():
    # 3 steps of 10 s each (60% rollout, 20% learner, 100 tokens), depths 40, 40 and 25.
    logs = run_logs("turnopd", 1, 10.0, [0.25, 0.5, 0.5, 0.75])
    logs = dataclasses.replace(
        logs, metrics=[step_metrics(k, 10.0, "turnopd", h_roll=h) for k, h in ((1, 40), (2, 40), (3, 25))]
    )
    assert learner_ms_per_token(logs.metrics) == pytest.approx(1000.0 * 2.0 / 100)  # 2 s per 100 tokens
    table, data = table_and_json([logs], 3)
    [row] = data
    assert (row["method"], row["seed"], row["steps"]) == ("turnopd", 1, 3)
    assert row["points"] == [
        {"step": 0, "avg_at_n": 0.25, "cumulative_s": 0.0},
        {"step": 1, "avg_at_n": 0.5, "cumulative_s": 10.0},
        {"step": 2, "avg_at_n": 0.5, "cumulative_s": 20.0},
        {"step": 3, "avg_at_n": 0.75, "cumulative_s": 30.0},
    ]
    assert row["wall_s"] == pytest.approx(30.0)
    assert row["mean_h_roll"] == pytest.approx(35.0)
    assert row["rollout_share"] == pytest.approx(0.6)
    assert row["learner_ms_per_token"] == pytest.approx(1000.0 * 2.0 / 100)
    assert table.rows[0][:5] == ["turnopd seed 1", "25.0", "50.0 (10 s)", "50.0 (20 s)", "75.0 (30 s)"]
    assert table.rows[0][5:] == ["30.0 s (3 steps)", "35.0", "60.0%", "20.00"] and len(table.rows) == 1


def test_rows_keep_the_method_order_and_sort_seeds():
    runs = [
        run_logs("turnopd", 2, 5.0, [0.0, 0.5]),
        run_logs("vanilla", 0, 10.0, [0.0, 0.25]),
        run_logs("turnopd", 0, 5.0, [0.0, 0.75]),
        run_logs("vanilla", 2, 10.0, [0.0, 0.25]),
    ]
    table, data = table_and_json(runs, 1)
    order = [("turnopd", 0), ("turnopd", 2), ("vanilla", 0), ("vanilla", 2)]
    assert [(r["method"], r["seed"]) for r in data] == order
    assert [row[0] for row in table.rows] == [f"{m} seed {s}" for m, s in order]


def test_the_table_has_a_column_per_evaluated_step_and_a_dash_where_a_run_has_no_point():
    longer = run_logs("turnopd", 0, 5.0, [0.25, 0.5, 0.75])
    sparse = run_logs("vanilla", 0, 10.0, [0.25, 0.5, 0.5])  # evaluated before step 1 and after step 2
    sparse = dataclasses.replace(sparse, evals=[e for e in sparse.evals if e.step != 1])
    table, _ = table_and_json([longer, sparse], 2)
    assert table.header[:4] == ["Run", "step 0", "step 1", "step 2"]
    assert table.rows[0][:4] == ["turnopd seed 0", "25.0", "50.0 (5 s)", "75.0 (10 s)"]
    assert table.rows[1][:4] == ["vanilla seed 0", "25.0", "-", "50.0 (20 s)"]
    assert table.rows[0][4:] == ["10.0 s (2 steps)", "6.0", "60.0%", "10.00"]


def test_a_run_without_steps_is_refused_by_name():
    # the table reads the comparison summary, which refuses the run before any row is made
    logs = dataclasses.replace(run_logs("vanilla", 3, 10.0, [0.5]), metrics=[])
    with pytest.raises(InputError, match=r"runs/vanilla/seed3: metrics\.jsonl must hold steps"):
        table_and_json([logs], 1)


def test_a_run_that_trained_no_token_has_no_learner_pace():
    logs = run_logs("vanilla", 0, 10.0, [0.0, 0.5])
    logs = dataclasses.replace(logs, metrics=[step_metrics(1, 10.0).model_copy(update={"tokens": 0})])
    assert learner_ms_per_token(logs.metrics) is None
    table, data = table_and_json([logs], 1)
    assert data[0]["learner_ms_per_token"] is None and table.rows[0][-1] == "-"
