"""The frontier's math on hand-made evaluation series: step-function band, time to threshold, best point."""

import dataclasses

import pytest
from comparison_logs import eval_record, run_logs

from services.errors import InputError
from services.experiments.frontier import (
    SeedReach,
    band,
    best_point,
    common_grid,
    frontiers,
    late_gain,
    late_slope,
    reach,
    reach_ratio,
    reach_threshold,
    seed_reach,
    step_value,
    whole_climb,
)
from services.experiments.report_data import AccuracyCurve


def curve(walls: list[float], accs: list[float], seed: int = 0) -> AccuracyCurve:
    return AccuracyCurve("vanilla", seed, walls, accs, list(range(len(walls))))


# Two seeds evaluated at the same steps, at different wall times (10 s and 12 s per step).
SEED_A = curve([0.0, 10.0, 20.0, 30.0], [0.0, 0.25, 0.5, 0.75])
SEED_B = curve([0.0, 12.0, 24.0, 36.0], [0.0, 0.5, 0.5, 1.0], seed=1)


def test_step_value_holds_the_last_evaluation_until_the_next():
    assert step_value(SEED_A, -1.0) is None
    assert step_value(SEED_A, 0.0) == 0.0
    assert step_value(SEED_A, 9.99) == 0.0
    assert step_value(SEED_A, 10.0) == 0.25
    assert step_value(SEED_A, 29.0) == 0.5
    assert step_value(SEED_A, 99.0) == 0.75


def test_grid_spans_where_every_seed_has_a_value():
    assert common_grid([SEED_A, SEED_B]) == [0.0, 10.0, 12.0, 20.0, 24.0, 30.0]  # B's 36 s: A has ended
    late_start = curve([5.0, 15.0, 25.0], [0.1, 0.2, 0.3])  # no evaluation before step 1
    assert common_grid([SEED_A, late_start]) == [5.0, 10.0, 15.0, 20.0, 25.0]
    with pytest.raises(InputError, match="evaluation point"):
        common_grid([SEED_A, curve([], [])])


def test_band_is_mean_min_and_max_of_the_step_functions():
    b = band("vanilla", [SEED_A, SEED_B])
    assert b.seeds == 2
    assert b.wall_s == [0.0, 10.0, 12.0, 20.0, 24.0, 30.0]
    # at 10 s: A 0.25, B still 0.0; at 12 s: A 0.25, B 0.5; at 30 s: A 0.75, B 0.5
    assert b.mean == [0.0, 0.125, 0.375, 0.5, 0.5, 0.625]
    assert b.low == [0.0, 0.0, 0.25, 0.5, 0.5, 0.5]
    assert b.high == [0.0, 0.25, 0.5, 0.5, 0.5, 0.75]


def test_reach_is_the_first_point_at_or_above_the_threshold():
    evals = [eval_record(k, 10.0 * k, a) for k, a in enumerate([0.0, 0.2, 0.36, 0.25, 0.4])]
    # 0.9 * 40/100 is 0.36000000000000004 in floats: 36 of 100 games must still count as reaching it
    threshold = 0.9 * (40 / 100)
    assert threshold > 36 / 100
    assert seed_reach(3, evals, threshold) == SeedReach(seed=3, step=2, wall_s=20.0)
    assert seed_reach(3, evals, 0.38) == SeedReach(seed=3, step=4, wall_s=40.0)
    assert seed_reach(3, evals, 0.5) == SeedReach(seed=3, step=None, wall_s=None)
    assert seed_reach(3, list(reversed(evals)), 0.25) == SeedReach(seed=3, step=2, wall_s=20.0)  # by step
    assert seed_reach(3, evals, 0.0) == SeedReach(seed=3, step=0, wall_s=0.0)


def test_reach_mean_needs_every_seed_and_the_ratio_both_means():
    fast = [run_logs("turnopd", 0, 5.0, [0.0, 0.25, 0.5]), run_logs("turnopd", 1, 10.0, [0.0, 0.5, 0.5])]
    slow = [run_logs("vanilla", 0, 10.0, [0.0, 0.25, 0.5]), run_logs("vanilla", 1, 10.0, [0.0, 0.25, 0.5])]
    ours, base = reach("turnopd", fast, 0.45), reach("vanilla", slow, 0.45)
    assert [s.wall_s for s in ours.seeds] == [10.0, 10.0] and ours.mean_s == 10.0 and ours.reached == 2
    assert [s.step for s in base.seeds] == [2, 2] and base.mean_s == 20.0
    assert reach_ratio(base, ours) == 2.0
    partial = reach("turnopd", [fast[0], run_logs("turnopd", 1, 10.0, [0.0, 0.25, 0.25])], 0.45)
    assert partial.reached == 1 and partial.mean_s is None
    assert reach_ratio(base, partial) is None
    at_start = reach("turnopd", [run_logs("turnopd", 0, 5.0, [0.5, 0.5])], 0.45)
    assert at_start.mean_s == 0.0 and reach_ratio(base, at_start) is None  # reached before training


def test_threshold_is_none_when_vanilla_has_nothing_to_reach():
    assert reach_threshold(0.5) == pytest.approx(0.45)
    assert reach_threshold(0.0) is None
    assert reach_threshold(None) is None


def test_best_point_is_the_highest_and_earliest_on_ties():
    evals = [eval_record(k, 7.0 * k, a) for k, a in enumerate([0.25, 0.75, 0.5, 0.75])]
    best = best_point(2, evals)
    assert (best.seed, best.step, best.wall_s, best.avg_at_n, best.episodes) == (2, 1, 7.0, 0.75, 4)
    with pytest.raises(InputError, match="seed 2"):
        best_point(2, [])


def test_late_gain_compares_the_last_four_points_with_the_four_before():
    evals = [eval_record(k, float(k), a) for k, a in enumerate([0.0, 0.25, 0.25, 0.5, 0.5, 0.5, 0.75, 0.75])]
    assert late_gain(evals) == pytest.approx(0.625 - 0.25)
    assert late_gain(evals[1:]) is None


def test_late_slope_is_the_least_squares_climb_per_step_of_the_last_four_points():
    evals = [eval_record(4 * k, float(k), a) for k, a in enumerate([0.0, 0.25, 0.5, 0.5, 0.625, 0.75])]
    # steps 8..20 (mean 14): accuracies .5, .5, .625, .75 (mean .59375);
    # slope = sum(dx dy) / sum(dx^2) = (6 * .09375 + 2 * .09375 + 2 * .03125 + 6 * .15625) / 80
    assert late_slope(evals) == pytest.approx(1.75 / 80.0)
    assert late_slope(list(reversed(evals))) == pytest.approx(1.75 / 80.0)  # read in step order
    assert late_slope(evals[:2]) == pytest.approx(0.25 / 4)
    assert late_slope(evals[:1]) is None
    assert late_slope([eval_record(3, 1.0, 0.5), eval_record(3, 2.0, 0.75)]) is None
    # the whole run: 0 at step 0 to .75 at step 20, in step order
    assert whole_climb(list(reversed(evals))) == pytest.approx(0.75 / 20)
    assert whole_climb(evals[:1]) is None


def test_frontiers_group_by_method_with_seeds_sorted():
    runs = [
        run_logs("turnopd", 1, 5.0, [0.0, 0.5, 0.5]),
        run_logs("vanilla", 0, 10.0, [0.0, 0.25, 0.5]),
        run_logs("turnopd", 0, 5.0, [0.0, 0.25, 0.75]),
    ]
    result = frontiers(runs, 0.45)
    assert list(result) == ["turnopd", "vanilla"]
    ours = result["turnopd"]
    assert [c.seed for c in ours.curves] == [0, 1]
    assert ours.reach is not None and [s.wall_s for s in ours.reach.seeds] == [10.0, 5.0]
    assert [b.avg_at_n for b in ours.best] == [0.75, 0.5] and ours.best_mean == 0.625
    assert ours.band.mean == [0.0, 0.375, 0.625]
    assert ours.late_gain is None
    # slopes over steps 0..2: seed 0 climbs .375 a step, seed 1 .25
    assert ours.late_slope == pytest.approx((0.375 + 0.25) / 2)
    assert frontiers(runs, None)["vanilla"].reach is None


def test_a_multi_environment_run_is_refused():
    logs = run_logs("vanilla", 0, 10.0, [0.0, 0.5])
    tagged = [e.model_copy(update={"env": "alfworld"}) for e in logs.evals]
    with pytest.raises(InputError, match="multi-environment"):
        frontiers([run_logs("turnopd", 0, 5.0, [0.0, 0.5]), dataclasses.replace(logs, evals=tagged)], 0.4)
