import numpy as np
import pytest

from services.contracts.arrays import PackedArray
from services.contracts.learner import LearnerSample
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
