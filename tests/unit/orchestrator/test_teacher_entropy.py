import numpy as np
import pytest

from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.contracts.trajectory import Trajectory, TurnRecord
from services.errors import InputError
from services.orchestrator.teacher_entropy import turn_entropy_sums, with_teacher_entropy


def trajectory(episode_id, spans):
    turns = [
        TurnRecord(index=i, response_start=a, response_end=b, action="look", accepted=True, observation="o")
        for i, (a, b) in enumerate(spans)
    ]
    n = sum(b - a for a, b in spans)
    return Trajectory(
        episode_id=episode_id, env="alfworld", split="train", token_ids=list(range(12)), turns=turns,
        sampler_logprobs=[-0.5] * n, reward=0.0, success=False, truncated=False, weights_version=0,
    )  # fmt: skip


def stats(tokens):
    return TrajectoryTurnStats(
        turn_tokens=tokens, turn_kl_sum=[0.5] * len(tokens), success=False, truncated=False
    )


def test_turn_entropy_sums_per_turn():
    tr = trajectory("a", [(2, 4), (6, 9)])
    assert turn_entropy_sums(tr, np.array([1.0, 2.0, 0.5, 0.25, 0.25])) == [3.0, 1.0]


def test_with_teacher_entropy_skips_unscored_trajectories():
    scored, empty, other = (
        trajectory("a", [(2, 4), (6, 7)]),
        trajectory("b", [(3, 3)]),
        trajectory("c", [(1, 2)]),
    )
    record = TurnStatsRecord(
        step=4, probe=True, alpha=0.5, h_roll=6, trajectories=[stats([2, 1]), stats([1])]
    )
    out = with_teacher_entropy(
        record, [scored, empty, other], [np.array([1.0, 1.5, 2.0]), np.zeros(0), np.array([0.75])]
    )
    assert [t.turn_entropy_sum for t in out.trajectories] == [[2.5, 2.0], [0.75]]
    assert out.step == 4 and out.trajectories[0].turn_kl_sum == [0.5, 0.5]


def test_with_teacher_entropy_rejects_misaligned_input():
    record = TurnStatsRecord(step=1, probe=True, alpha=0.0, h_roll=6, trajectories=[stats([3])])
    with pytest.raises(InputError, match="does not match"):
        with_teacher_entropy(record, [trajectory("a", [(2, 4)])], [np.array([1.0, 1.0])])
    with pytest.raises(InputError, match="2 entropies for 1 tokens"):
        turn_entropy_sums(trajectory("a", [(2, 3)]), np.array([1.0, 1.0]))


def test_entropy_length_must_match_turns():
    with pytest.raises(ValueError, match="turn_entropy_sum"):
        TrajectoryTurnStats(
            turn_tokens=[1, 2], turn_kl_sum=[0.1, 0.2], success=True, truncated=False, turn_entropy_sum=[1.0]
        )
