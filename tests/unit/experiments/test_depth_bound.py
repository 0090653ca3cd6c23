"""Depth schedules replayed on hand-made full-depth episodes: every ratio traced to the tokens below."""

import pytest
from comparison_logs import step_metrics

from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.errors import InputError
from services.experiments.depth_bound import (
    Schedule,
    as_run,
    capped_tokens,
    fixed_cap,
    full_depth,
    probe_steps,
    replay,
    without_lag,
)
from services.experiments.step_cost import StepCostModel

PER_TOKEN = StepCostModel(a=1.0, b=0.0, speeds={}, r2=1.0, steps=0)  # seconds = thousands of tokens


def episode(turns: int, success: bool, tokens: int = 100) -> TrajectoryTurnStats:
    return TrajectoryTurnStats(
        turn_tokens=[tokens] * turns, turn_kl_sum=[0.1] * turns, success=success, truncated=not success
    )


def step(k: int, h_roll: int = 6) -> TurnStatsRecord:
    """A full-depth step of two episodes: a 2-turn win and a loss played to the 6-turn cap."""
    return TurnStatsRecord(
        step=k, probe=k == 1, alpha=0.0, h_roll=h_roll, trajectories=[episode(2, True), episode(6, False)]
    )


def test_capped_tokens_cut_each_episode_after_the_cap():
    assert capped_tokens(step(1), 6) == 800
    assert capped_tokens(step(1), 3) == 200 + 300
    assert capped_tokens(step(1), 1) == 200


def test_replay_is_the_full_runs_cost_over_the_capped_one():
    run = [step(1), step(2), step(3)]
    r = replay(PER_TOKEN, run, Schedule("probe, then 3, then 1", [6, 3, 1]), [1, 2, 3, 4])
    # full steps cost 0.8 each; capped 0.8, 0.5, 0.2
    assert r.ratios == {1: pytest.approx(1.0), 2: pytest.approx(1.6 / 1.3), 3: pytest.approx(2.4 / 1.5)}
    # the wins take 2 turns: kept under caps 6 and 3, cut under 1
    assert r.successes_kept == pytest.approx(2 / 3)
    # the T^2 / E term: 1 s per (1k tokens)^2 over the 2 episodes
    square = StepCostModel(a=0.0, b=1.0, speeds={}, r2=1.0, steps=0)
    assert replay(square, run, Schedule("3", [3, 3, 3]), [1]).ratios[1] == pytest.approx(0.8**2 / 0.5**2)
    losses = [TurnStatsRecord(step=1, probe=True, alpha=0.0, h_roll=6, trajectories=[episode(6, False)])]
    assert replay(PER_TOKEN, losses, Schedule("3", [3]), [1]).successes_kept is None


def test_a_replay_needs_a_whole_full_depth_run_and_a_cap_per_step():
    with pytest.raises(InputError, match="got none"):
        full_depth([])
    with pytest.raises(InputError, match=r"steps 1..K each once; got steps \[1, 3\]"):
        full_depth([step(1), step(3)])
    with pytest.raises(InputError, match=r"full-depth run \(vanilla\); steps \[2\] were cut below 6"):
        full_depth([step(1), step(2, h_roll=4)])
    assert [r.step for r in full_depth([step(2), step(1)])] == [1, 2]
    with pytest.raises(InputError, match="has 1 caps for 2 steps"):
        replay(PER_TOKEN, [step(1), step(2)], Schedule("short", [3]), [1])


def test_schedules_follow_algorithm_1():
    assert probe_steps(10, 3, 4) == [True, True, True, True, False, False, False, True, False, False]
    assert fixed_cap("3", 3, 6, [True, False, True]).caps == [6, 3, 6]
    metrics = [
        step_metrics(1, 1.0, "turnopd", h_roll=6).model_copy(update={"probe": True, "h_ctrl": 2}),
        step_metrics(2, 1.0, "turnopd", h_roll=5).model_copy(update={"probe": False, "h_ctrl": 2}),
        step_metrics(3, 1.0, "turnopd", h_roll=6).model_copy(update={"probe": True, "h_ctrl": 0}),
        step_metrics(4, 1.0, "turnopd", h_roll=5).model_copy(update={"probe": False, "h_ctrl": 0}),
    ]
    assert as_run("ran", list(reversed(metrics))).caps == [6, 5, 6, 5]
    # after each probe its H_ctrl + 1, clipped below at H_min 2; probes play to the cap
    assert without_lag("no lag", metrics, 2, 6).caps == [6, 3, 6, 2]
