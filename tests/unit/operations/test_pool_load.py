import pytest

from services.contracts.orchestrator import StepTimes
from services.operations.pool_load import pool_busy_seconds, pool_load


def times(total, rollout=None, teacher=None, learner=None, overlap=None):
    return StepTimes(
        rollout_s=1.0, teacher_s=1.0, learner_s=1.0, other_s=0.0, total_s=total,
        rollout_busy_s=rollout, teacher_busy_s=teacher, learner_busy_s=learner, overlap_s=overlap,
    )  # fmt: skip


def test_busy_seconds_need_every_pool_recorded():
    assert pool_busy_seconds(times(4.0, 2.0, 1.0, 3.0, 2.0)) == {
        "rollout": 2.0,
        "teacher": 1.0,
        "learner": 3.0,
    }
    assert pool_busy_seconds(times(4.0, teacher=1.0)) is None  # a log line from before: teacher only


def test_load_is_the_share_of_the_recorded_steps_wall_time():
    steps = [times(4.0, 2.0, 1.0, 3.0, 2.0), times(6.0, 4.0, 0.0, 3.0, 1.0), times(9.0, teacher=9.0)]
    load = pool_load(steps)
    assert load is not None and load.wall_s == 10.0  # the third step recorded no busy times
    assert load.busy == pytest.approx({"rollout": 0.6, "teacher": 0.1, "learner": 0.6})
    assert load.overlap == pytest.approx(0.3)
    assert pool_load(steps[2:]) is None and pool_load([]) is None
    assert pool_load([times(0.0, 0.0, 0.0, 0.0, 0.0)]).busy == {
        "rollout": 0.0,
        "teacher": 0.0,
        "learner": 0.0,
    }
