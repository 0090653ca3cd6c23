import numpy as np
import pytest

from services.contracts.controller import StepPlan
from services.contracts.trajectory import Trajectory, TurnRecord
from services.errors import InputError
from services.orchestrator.step_data import (
    TeacherScores,
    learner_batch,
    learner_samples,
    supervised_positions,
    supervised_trajectories,
    turn_entropy_sums,
)


def trajectory(episode_id, spans, success=False):
    turns = [
        TurnRecord(index=i, response_start=a, response_end=b, action="look", accepted=True, observation="o")
        for i, (a, b) in enumerate(spans)
    ]
    n = sum(b - a for a, b in spans)
    return Trajectory(
        episode_id=episode_id, env="alfworld", split="train", token_ids=list(range(12)), turns=turns,
        sampler_logprobs=[-0.5] * n, reward=0.0, success=success, truncated=False, weights_version=0,
    )  # fmt: skip


def scores(n, k=2, entropy=None, base=0):
    ids = np.arange(base, base + n * k, dtype=np.int64).reshape(n, k)
    lps = np.full((n, k), -1.5, dtype=np.float32)
    return TeacherScores(ids, lps, None if entropy is None else np.asarray(entropy, dtype=np.float32))


PLAN = StepPlan(step=4, probe=True, h_roll=6, h_hat=3, alpha=0.5, weights_version=3)


def test_supervised_trajectories_drop_the_empty_ones_in_order():
    a, empty, c = trajectory("a", [(2, 4), (6, 7)]), trajectory("b", [(3, 3)]), trajectory("c", [(1, 2)])
    assert [t.episode_id for t in supervised_trajectories([a, empty, c])] == ["a", "c"]
    assert supervised_trajectories([empty]) == []
    assert supervised_positions(a) == ([2, 3, 6], [0, 0, 1])


def test_turn_entropy_sums_per_turn():
    tr = trajectory("a", [(2, 4), (6, 9)])
    assert turn_entropy_sums(tr, np.array([1.0, 2.0, 0.5, 0.25, 0.25])) == [3.0, 1.0]
    with pytest.raises(InputError, match="2 entropies for 1 tokens"):
        turn_entropy_sums(trajectory("a", [(2, 3)]), np.array([1.0, 1.0]))


def test_learner_batch_attaches_teacher_scores_entropy_and_blended_weights():
    a, c = trajectory("a", [(2, 4), (6, 7)], success=True), trajectory("c", [(1, 2)])
    batch = learner_batch(
        PLAN, [a, c], [scores(3, entropy=[1.0, 1.5, 2.0]), scores(1, entropy=[0.75], base=100)], 1, 0.0
    )
    assert (batch.step, batch.probe, batch.alpha, batch.h_roll) == (4, True, 0.5, 6)
    first, second = batch.samples
    assert first.positions == [2, 3, 6] and first.turn_index == [0, 0, 1] and second.positions == [1]
    assert first.teacher_top_ids.unpack().tolist() == [[0, 1], [2, 3], [4, 5]]
    assert second.teacher_top_ids.unpack().tolist() == [[100, 101]]
    assert second.teacher_top_logprobs.unpack().tolist() == [[-1.5, -1.5]]
    assert [s.turn_entropy_sum for s in batch.samples] == [[2.5, 2.0], [0.75]]
    assert (first.num_turns, first.success, second.success) == (2, True, False)
    # alpha 0.5 between trajectory level (1/6 per token of a, 1/2 of c) and turn level (two reliable
    # turns of mass 1/2: turn 0 split between a's 2 tokens and c's 1, turn 1 all a's last token)
    assert first.token_weights == pytest.approx([7 / 48, 7 / 48, 1 / 3])
    assert second.token_weights == pytest.approx([3 / 8])
    assert sum(first.token_weights) + sum(second.token_weights) == pytest.approx(1.0)


def test_entropy_is_left_out_when_the_teacher_did_not_record_it():
    (sample,) = learner_samples([trajectory("c", [(1, 2)])], [scores(1)], 0.0, 1, 0.0)
    assert sample.turn_entropy_sum is None and sample.token_weights == [1.0]


def test_learner_samples_reject_misaligned_input():
    a, empty = trajectory("a", [(2, 4)]), trajectory("b", [(3, 3)])
    with pytest.raises(InputError, match="1 trajectories but 2 teacher score sets"):
        learner_samples([a], [scores(2), scores(2)], 0.0, 1, 0.0)
    with pytest.raises(InputError, match="teacher scored 3 of 2 tokens"):
        learner_samples([a], [scores(3)], 0.0, 1, 0.0)
    with pytest.raises(InputError, match="without supervised tokens"):
        learner_samples([a, empty], [scores(2), scores(0)], 0.0, 1, 0.0)
    with pytest.raises(InputError, match="no trajectory in the batch has supervised tokens"):
        learner_samples([], [], 0.0, 1, 0.0)
    with pytest.raises(InputError, match="1 entropies for 2 tokens"):
        learner_samples([a], [scores(2, entropy=[1.0])], 0.0, 1, 0.0)
