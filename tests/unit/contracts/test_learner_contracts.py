import numpy as np
import pytest

from services.contracts.arrays import PackedArray
from services.contracts.learner import (
    LearnerCheckpointRequest,
    LearnerInboxMessage,
    LearnerSample,
    LearnerShard,
    LearnerStop,
)
from services.contracts.records import TrajectoryTurnStats


def sample(**changes):
    fields = dict(
        token_ids=[5, 6, 7, 8], positions=[2, 3], turn_index=[0, 1], token_weights=[0.5, 0.5],
        sampler_logprobs=[-0.1, -0.2], teacher_top_ids=PackedArray.pack(np.zeros((2, 3), dtype=np.int64)),
        teacher_top_logprobs=PackedArray.pack(np.zeros((2, 3), dtype=np.float32)), num_turns=2,
        success=True, truncated=False,
    )  # fmt: skip
    return LearnerSample(**{**fields, **changes})


def test_sample_carries_one_entropy_sum_per_turn():
    assert sample().turn_entropy_sum is None
    assert sample(turn_entropy_sum=[1.0, 2.5]).turn_entropy_sum == [1.0, 2.5]
    with pytest.raises(ValueError, match=r"turn_entropy_sum must have num_turns \(2\) entries"):
        sample(turn_entropy_sum=[1.0])


def test_entropy_length_must_match_turns():
    with pytest.raises(ValueError, match="turn_entropy_sum"):
        TrajectoryTurnStats(
            turn_tokens=[1, 2], turn_kl_sum=[0.1, 0.2], success=True, truncated=False, turn_entropy_sum=[1.0]
        )


def test_shard_names_the_batch_index_of_each_sample():
    shard = LearnerShard(step=3, samples=[sample(), sample()], sample_ids=[0, 4])
    assert (shard.step, shard.sample_ids) == (3, [0, 4])
    assert LearnerShard(step=3, samples=[], sample_ids=[]).samples == []  # a rank without a trajectory
    with pytest.raises(ValueError, match="1 sample ids for 2 samples"):
        LearnerShard(step=3, samples=[sample(), sample()], sample_ids=[0])
    with pytest.raises(ValueError, match="strictly ascending"):
        LearnerShard(step=3, samples=[sample(), sample()], sample_ids=[4, 0])


def test_inbox_messages_are_told_apart_by_type():
    def kind(message: LearnerInboxMessage) -> str:
        match message:
            case LearnerStop():
                return "stop"
            case LearnerCheckpointRequest(step=step):
                return f"checkpoint {step}"
            case LearnerShard(step=step, sample_ids=ids):
                return f"step {step} samples {ids}"
            case _:
                raise AssertionError(message)

    messages = [LearnerShard(step=2, samples=[sample()], sample_ids=[1]), LearnerCheckpointRequest(step=2)]
    assert [kind(m) for m in [*messages, LearnerStop()]] == ["step 2 samples [1]", "checkpoint 2", "stop"]
