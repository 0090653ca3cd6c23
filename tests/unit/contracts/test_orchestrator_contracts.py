import pytest
from pydantic import ValidationError

from services.contracts.orchestrator import StepTimes

SPLIT = {"rollout_s": 3.0, "teacher_s": 1.0, "learner_s": 2.0, "other_s": 0.5, "total_s": 6.5}


def test_step_times_written_before_the_teacher_busy_time_still_parse():
    times = StepTimes.model_validate(SPLIT)
    assert (times.teacher_busy_s, times.teacher_overlap_s) == (None, None)
    streamed = StepTimes(**SPLIT, teacher_busy_s=1.75, teacher_overlap_s=0.75)
    assert StepTimes.model_validate_json(streamed.model_dump_json()) == streamed


def test_step_times_reject_negative_busy_time():
    with pytest.raises(ValidationError, match="teacher_busy_s"):
        StepTimes(**SPLIT, teacher_busy_s=-1.0)
