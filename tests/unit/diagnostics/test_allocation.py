"""The loss-allocation report against hand computations and an independent numpy reference."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.diagnostics.allocation import diagnose, phase_of
from services.errors import InputError
from services.settings.algorithm import BlendSettings
from services.settings.tree import DiagnosticsSettings


def traj(tokens, kls, success=False):
    return TrajectoryTurnStats(turn_tokens=tokens, turn_kl_sum=kls, success=success, truncated=False)


def test_phases_split_30_30_40():
    assert [phase_of(i, 10) for i in range(10)] == ["early"] * 3 + ["mid"] * 3 + ["late"] * 4
    assert [phase_of(i, 100) for i in range(100)].count("early") == 30
    assert [phase_of(i, 1) for i in range(1)] == ["early"]


def test_duplicate_steps_and_empty_batches_are_errors():
    rec = TurnStatsRecord(step=1, probe=True, alpha=0.0, h_roll=2, trajectories=[traj([1], [0.1])])
    with pytest.raises(InputError, match="step 1 appears more than once"):
        diagnose([rec, rec], BlendSettings(), DiagnosticsSettings())
    empty = TurnStatsRecord(step=2, probe=True, alpha=0.0, h_roll=2, trajectories=[traj([0], [0.0])])
    with pytest.raises(InputError, match="step 2: batch has no supervised tokens"):
        diagnose([rec, empty], BlendSettings(), DiagnosticsSettings())


def test_small_run_hand_values():
    thresholds = DiagnosticsSettings(min_survivors=2, min_survivor_frac=0.5, min_step_frac=0.6)
    # 3 trajectories per step, each turn with 1 token; turn t KL = 1/(t+1); step 2 loses turn 2.
    full = [traj([1, 1, 1], [1.0, 0.5, 1 / 3], success=True) for _ in range(3)]
    short = [traj([1, 1], [1.0, 0.5]) for _ in range(3)]
    records = [
        TurnStatsRecord(step=1, probe=True, alpha=0.0, h_roll=3, trajectories=full),
        TurnStatsRecord(step=2, probe=False, alpha=0.5, h_roll=2, trajectories=short),
        TurnStatsRecord(step=3, probe=False, alpha=1.0, h_roll=3, trajectories=full),
    ]
    report = diagnose(records, BlendSettings(min_floor=1, min_frac=0.0), thresholds)
    assert report.reliable_prefix == 3  # turn 2 supported in 2/3 >= 60% of steps
    assert report.shallow_turns == [0] and report.deep_turns == [2]
    # trajectory-level deep share: step 1 and 3: (1/3)/(1 + 1/2 + 1/3) = 2/11, step 2: 0
    assert report.deep_loss_budget == pytest.approx((2 / 11 + 0 + 2 / 11) / 3)
    # actual weights: step 3 at alpha=1 gives each turn equal mass -> share of turn 2 = (1/3)/(11/6)
    assert report.phases["late"].deep_loss_budget_actual == pytest.approx(
        (1 / 3) / (1 + 0.5 + 1 / 3) * 0 + 2 / 11
    )
    assert report.deep_shallow_kl_ratio == pytest.approx((1 / 3) / 1.0)
    assert report.deep_support == pytest.approx((1 + 0 + 1) / 3)
    assert report.per_turn[2].mean_survivors == pytest.approx(2.0)
    assert [t.reliable for t in report.per_turn] == [True, True, True]
    assert report.per_turn[0].gap is None  # step 1/3 all succeed, step 2 all fail: no step has both


def reference_prefix_and_budget(records, min_surv, min_frac, min_step):
    """Independent numpy reference for R and the trajectory-level deep loss budget."""
    depth = max(len(t.turn_tokens) for r in records for t in r.trajectories)
    n = np.zeros((len(records), depth))
    for i, r in enumerate(records):
        for t in r.trajectories:
            n[i, : len(t.turn_tokens)] += 1
    ok = (n >= min_surv) & (n / n[:, :1] >= min_frac)
    frac_ok = ok.mean(axis=0)
    R = 0
    while depth > R and frac_ok[R] >= min_step:
        R += 1
    if R == 0:
        return 0, None
    c = math.ceil(R / 3)
    budgets = []
    for r in records:
        mass = np.zeros(depth)
        live = [t for t in r.trajectories if sum(t.turn_tokens) > 0]
        for t in live:
            w = 1.0 / (len(live) * sum(t.turn_tokens))
            mass[: len(t.turn_kl_sum)] += w * np.array(t.turn_kl_sum)
        budgets.append(mass[R - c : R].sum() / mass.sum() if mass.sum() else 0.0)
    return R, float(np.mean(budgets))


def test_a_deep_shallow_ratio_that_overflows_is_none_not_inf():
    """A shallow third whose KL is subnormal (hypothesis found one: 5e-324 per token) divides a
    normal deep KL into infinity; the ratio is then undefined (None), like a zero shallow KL."""
    thresholds = DiagnosticsSettings(min_survivors=1, min_survivor_frac=0.0, min_step_frac=0.0)
    tiny = traj([1, 1, 1], [5e-324, 0.5, 2.0])
    records = [TurnStatsRecord(step=1, probe=True, alpha=0.0, h_roll=3, trajectories=[tiny])]
    report = diagnose(records, BlendSettings(min_floor=1, min_frac=0.0), thresholds)
    assert report.shallow_turns == [0] and report.deep_turns == [2]
    assert report.deep_shallow_kl_ratio is None
    assert all(p.deep_shallow_kl_ratio is None for p in report.phases.values() if p.n_steps)
    normal = traj([1, 1, 1], [1e-3, 0.5, 2.0])
    records = [TurnStatsRecord(step=1, probe=True, alpha=0.0, h_roll=3, trajectories=[normal])]
    ratio = diagnose(records, BlendSettings(min_floor=1, min_frac=0.0), thresholds).deep_shallow_kl_ratio
    assert ratio == pytest.approx(2.0 / 1e-3)


@st.composite
def runs(draw):
    records = []
    for k in range(1, draw(st.integers(1, 12)) + 1):
        trajs = []
        for _ in range(draw(st.integers(1, 14))):
            turns = draw(st.integers(1, 8))
            tokens = draw(st.lists(st.integers(1, 9), min_size=turns, max_size=turns))
            kls = [n * draw(st.floats(0.0, 3.0)) for n in tokens]
            trajs.append(traj(tokens, kls, draw(st.booleans())))
        records.append(
            TurnStatsRecord(
                step=k, probe=k % 2 == 1, alpha=draw(st.floats(0, 1)), h_roll=8, trajectories=trajs
            )
        )
    return records


@settings(max_examples=150, deadline=None)
@given(runs(), st.integers(0, 6), st.sampled_from([0.0, 0.1, 0.3]), st.sampled_from([0.3, 0.6, 1.0]))
def test_prefix_and_deep_budget_equal_independent_reference(records, min_surv, min_frac, min_step):
    thresholds = DiagnosticsSettings(
        min_survivors=min_surv, min_survivor_frac=min_frac, min_step_frac=min_step
    )
    report = diagnose(records, BlendSettings(), thresholds)
    R, budget = reference_prefix_and_budget(records, min_surv, min_frac, min_step)
    assert report.reliable_prefix == R
    if budget is None:
        assert report.deep_loss_budget is None
    else:
        assert report.deep_loss_budget == pytest.approx(budget, abs=1e-12)
    assert sum(p.n_steps for p in report.phases.values()) == len(records)
