"""Same-Step and Least-Time on hand-made evaluation series (values chosen so the math is exact)."""

import dataclasses
import statistics

import pytest
from comparison_logs import eval_record, run_logs

from services.contracts.experiments import ComparisonSummary
from services.errors import InputError
from services.experiments.protocols import (
    least_time_cutoffs,
    summarise,
    window_points,
    window_score,
)

# Evaluated before step 1 and after each of 6 steps. Vanilla: 10 s per step; TurnOPD: 5 s.
VANILLA_0 = [0.25, 0.25, 0.5, 0.5, 0.5, 0.75, 0.75]
TURNOPD_0 = [0.0, 0.5, 0.5, 0.75, 0.75, 1.0, 1.0]


def test_window_takes_the_last_four_points_before_each_cutoff():
    evals = [eval_record(k, 10.0 * k, a) for k, a in enumerate(VANILLA_0)]
    assert [e.step for e in window_points(evals, 6)] == [3, 4, 5, 6]
    assert [e.step for e in window_points(evals, 4)] == [1, 2, 3, 4]
    assert [e.step for e in window_points(evals, 6, 30.0)] == [0, 1, 2, 3]  # cutoff inclusive
    assert [e.step for e in window_points(evals, 6, 29.999)] == [0, 1, 2]
    assert [e.step for e in window_points(list(reversed(evals)), 6, None, 2)] == [5, 6]
    score = window_score(window_points(evals, 6), lambda e: e.avg_at_n)
    assert (score.mean, score.std, score.steps) == (0.625, 0.125, [3, 4, 5, 6])
    assert window_score([], lambda e: e.avg_at_n).mean is None


def test_least_time_cutoff_is_the_fastest_method_per_seed():
    walls = {("vanilla", 0): 60.0, ("turnopd", 0): 30.0, ("vanilla", 1): 50.0, ("turnopd", 1): 55.0}
    assert least_time_cutoffs(walls) == {0: 30.0, 1: 50.0}


def test_summary_of_one_seed():
    summary = summarise([run_logs("turnopd", 0, 5.0, TURNOPD_0), run_logs("vanilla", 0, 10.0, VANILLA_0)], 6)
    assert list(summary.methods) == ["turnopd", "vanilla"]
    assert summary.least_time_cutoff_s == {"0": 30.0} and summary.steps == 6 and summary.window == 4
    turnopd, vanilla = summary.methods["turnopd"], summary.methods["vanilla"]
    # Same-Step: steps 3..6 of each run.
    assert (turnopd.same_step_acc, turnopd.same_step_std) == (0.875, 0.125)
    assert (vanilla.same_step_acc, vanilla.same_step_std) == (0.625, 0.125)
    # Least-Time at 30 s: TurnOPD's own step 6; vanilla reached step 3 (points 0..3).
    assert (turnopd.least_time_acc, turnopd.least_time_std) == (0.875, 0.125)
    assert (vanilla.least_time_acc, vanilla.least_time_std) == (0.375, 0.125)
    assert vanilla.runs[0].least_time.steps == [0, 1, 2, 3]
    assert (turnopd.wall_time_s, vanilla.wall_time_s) == (30.0, 60.0)
    assert (turnopd.speedup_vs_vanilla, vanilla.speedup_vs_vanilla) == (2.0, 1.0)
    assert turnopd.same_step_seed_std is None and turnopd.wall_time_seed_std is None
    # Task type b scores 1 - acc on the same points.
    assert vanilla.per_task_type["a"].least_time_acc == 0.375
    assert (vanilla.per_task_type["b"].least_time_acc, vanilla.per_task_type["b"].least_time_std) == (
        0.625,
        0.125,
    )
    assert turnopd.per_task_type["b"].same_step_acc == 0.125
    run = vanilla.runs[0]
    assert (run.time_split.rollout_s, run.time_split.learner_s) == pytest.approx((36.0, 12.0))
    assert run.mean_h_roll == 6.0 and run.least_time_cutoff_s == 30.0
    assert ComparisonSummary.model_validate_json(summary.model_dump_json()) == summary


def test_summary_over_two_seeds():
    vanilla_1 = [a + 0.25 for a in VANILLA_0]
    runs = [
        run_logs("vanilla", 0, 10.0, VANILLA_0),
        run_logs("vanilla", 1, 20.0, vanilla_1),
        run_logs("turnopd", 0, 5.0, TURNOPD_0),
        run_logs("turnopd", 1, 10.0, TURNOPD_0),
    ]
    summary = summarise(runs, 6)
    assert summary.seeds == [0, 1] and summary.least_time_cutoff_s == {"0": 30.0, "1": 60.0}
    vanilla, turnopd = summary.methods["vanilla"], summary.methods["turnopd"]
    assert vanilla.same_step_acc == 0.75  # (0.625 + 0.875) / 2
    assert vanilla.same_step_std == 0.125
    assert vanilla.same_step_seed_std == statistics.stdev([0.625, 0.875])
    # Seed 1's cutoff is 60 s: vanilla (20 s/step) reached step 3 there too.
    assert [r.least_time.steps for r in vanilla.runs] == [[0, 1, 2, 3], [0, 1, 2, 3]]
    assert vanilla.least_time_acc == 0.5  # (0.375 + 0.625) / 2
    assert (vanilla.wall_time_s, turnopd.wall_time_s) == (90.0, 45.0)
    assert turnopd.speedup_vs_vanilla == 2.0 and turnopd.wall_time_seed_std == statistics.stdev([30.0, 60.0])
    assert [r.speedup_vs_vanilla for r in turnopd.runs] == [2.0, 2.0]
    assert turnopd.same_step_seed_std == 0.0


def test_same_step_ignores_evaluations_after_step_k():
    summary = summarise([run_logs("turnopd", 0, 5.0, TURNOPD_0)], 4)
    m = summary.methods["turnopd"]
    assert m.runs[0].same_step.steps == [1, 2, 3, 4] and m.same_step_acc == 0.625
    assert m.wall_time_s == 20.0 and m.speedup_vs_vanilla is None  # no vanilla run


def test_a_window_without_points_makes_the_method_score_none():
    sparse = run_logs("vanilla", 0, 10.0, VANILLA_0)
    sparse = type(sparse)(
        sparse.method, 0, sparse.run_dir, sparse.metrics, [e for e in sparse.evals if e.step >= 5]
    )
    summary = summarise([run_logs("turnopd", 0, 5.0, TURNOPD_0), sparse], 6)
    assert summary.methods["vanilla"].least_time_acc is None
    assert summary.methods["vanilla"].same_step_acc == 0.75


def test_incomplete_grids_and_runs_are_errors():
    with pytest.raises(InputError, match="missing: turnopd seed 1"):
        summarise(
            [
                run_logs("vanilla", 0, 1.0, VANILLA_0),
                run_logs("vanilla", 1, 1.0, VANILLA_0),
                run_logs("turnopd", 0, 1.0, TURNOPD_0),
            ],
            6,
        )
    with pytest.raises(InputError, match=r"steps 1\.\.8 once each, has 1\.\.6"):
        summarise([run_logs("vanilla", 0, 1.0, VANILLA_0)], 8)
    no_final = run_logs("vanilla", 0, 1.0, VANILLA_0)
    no_final = type(no_final)("vanilla", 0, "r", no_final.metrics, no_final.evals[:-1])
    with pytest.raises(InputError, match="no evaluation after step 6"):
        summarise([no_final], 6)
    with pytest.raises(InputError, match="no runs"):
        summarise([], 6)


def test_a_multi_environment_run_is_scored_per_source_and_by_their_mean():
    from services.experiments.tables import comparison_markdown

    def mixed(method, step_s, household, search):
        logs = run_logs(method, 0, step_s, household)
        shop = run_logs(method, 0, step_s, search)
        evals = [e.model_copy(update={"env": "alfworld"}) for e in logs.evals]
        evals += [
            e.model_copy(update={"env": "search", "per_task_type": {"hop": e.avg_at_n}}) for e in shop.evals
        ]
        return dataclasses.replace(logs, evals=evals)

    summary = summarise(
        [mixed("turnopd", 5.0, TURNOPD_0, VANILLA_0), mixed("vanilla", 10.0, VANILLA_0, VANILLA_0)], 6
    )
    turnopd = summary.methods["turnopd"]
    assert (
        turnopd.per_env["alfworld"].same_step_acc == 0.875
        and turnopd.per_env["search"].same_step_acc == 0.625
    )
    assert turnopd.same_step_acc == pytest.approx((0.875 + 0.625) / 2)  # the sources' mean
    assert turnopd.runs[0].per_env["search"].same_step.steps == [3, 4, 5, 6]  # its own four points
    assert (
        turnopd.per_task_type["hop"].same_step_acc == 0.625
        and turnopd.per_task_type["a"].same_step_acc == 0.875
    )
    page = comparison_markdown(summary)
    assert (
        "### Per environment, Least-Time" in page
        and "| Method | alfworld | search | Mean Least-Time |" in page
    )
    assert "Per environment" not in comparison_markdown(
        summarise([run_logs("vanilla", 0, 10.0, VANILLA_0)], 6)
    )
