import pytest

from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.controller.depth import efficiency_horizon
from services.orchestrator.probe_stats import probe_stats


def test_probe_stats_from_turn_stats():
    record = TurnStatsRecord(
        step=8,
        probe=True,
        alpha=0.1,
        h_roll=50,
        trajectories=[
            TrajectoryTurnStats(
                turn_tokens=[4, 2, 2], turn_kl_sum=[2.0, 0.4, 0.2], success=True, truncated=False
            ),
            TrajectoryTurnStats(turn_tokens=[4], turn_kl_sum=[1.0], success=False, truncated=False),
            TrajectoryTurnStats(turn_tokens=[2, 0], turn_kl_sum=[0.2, 0.0], success=True, truncated=False),
        ],
    )
    stats = probe_stats(record)
    assert stats.step == 8
    assert stats.survivors == [3, 2, 1]
    assert stats.kl_per_turn == pytest.approx([3.2 / 10, 0.4 / 2, 0.2 / 2])
    assert sorted(stats.success_turns) == [1, 2]
    assert efficiency_horizon(stats.kl_per_turn, stats.survivors, 1e-8) == 0
