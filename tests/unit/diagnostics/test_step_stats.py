import pytest

from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.diagnostics.step_stats import mean_token_kl, step_stats


def record(alpha=0.0):
    return TurnStatsRecord(
        step=1,
        probe=True,
        alpha=alpha,
        h_roll=5,
        trajectories=[
            TrajectoryTurnStats(turn_tokens=[2, 4], turn_kl_sum=[1.0, 2.0], success=True, truncated=False),
            TrajectoryTurnStats(turn_tokens=[3], turn_kl_sum=[0.6], success=False, truncated=False),
        ],
    )


def test_hand_computed_turn_statistics():
    s = step_stats(record(), min_floor=1, min_frac=0.0)
    assert s.survivors == [2, 1]
    assert s.tokens == [5, 4]
    assert s.kl == pytest.approx([1.6 / 5, 2.0 / 4])
    assert s.kl_succ == pytest.approx([0.5, 0.5])
    assert s.kl_fail[0] == pytest.approx(0.2) and s.kl_fail[1] is None
    assert s.gap(0) == pytest.approx(-0.3) and s.gap(1) is None
    # seq-mean-token-mean: A's tokens weigh 1/12, B's 1/6 -> masses 1/12, 2/12 (A) and 0.1 (B)
    assert s.share_traj == pytest.approx([(1 / 12 + 0.1) / 0.35, (2 / 12) / 0.35])
    assert s.share_actual == s.share_traj  # alpha = 0


def test_actual_shares_follow_the_blend():
    s = step_stats(record(alpha=1.0), min_floor=1, min_frac=0.0)
    # alpha = 1, both turns reliable (n_min = 1): turn mass 1/2 each.
    # turn 0: A and B segments get 1/4 each -> per token 1/8 (A), 1/12 (B); turn 1: A gets 1/2 over 4 tokens
    m0 = 1 / 8 * 1.0 + 1 / 12 * 0.6
    m1 = 1 / 8 * 2.0
    assert s.share_actual == pytest.approx([m0 / (m0 + m1), m1 / (m0 + m1)])


def test_mean_token_kl_pools_the_tokens_of_the_first_turns():
    trajectories = record().trajectories
    assert mean_token_kl(trajectories, 1) == pytest.approx(1.6 / 5)
    assert mean_token_kl(trajectories, 2) == pytest.approx(3.6 / 9)
    assert mean_token_kl(trajectories, 9) == mean_token_kl(trajectories, 2)
    assert mean_token_kl(trajectories, 0) is None
