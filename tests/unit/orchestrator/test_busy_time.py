import pytest

from services.orchestrator.busy_time import busy_seconds, merged, overlap_seconds, shared_seconds


def test_requests_in_flight_together_count_once():
    intervals = [(4.0, 6.0), (0.0, 1.0), (0.5, 2.0), (3.0, 3.0), (5.0, 5.5)]
    assert merged(intervals) == [(0.0, 2.0), (4.0, 6.0)]
    assert busy_seconds(intervals) == 4.0
    assert busy_seconds([]) == 0.0


def test_overlap_is_the_busy_time_inside_the_window():
    intervals = [(0.0, 2.0), (1.5, 3.0), (4.0, 6.0)]
    assert overlap_seconds(intervals, (1.0, 5.0)) == pytest.approx(3.0)  # [1, 3] and [4, 5]
    assert overlap_seconds(intervals, (6.0, 9.0)) == 0.0
    assert overlap_seconds(intervals, (-1.0, 10.0)) == busy_seconds(intervals) == 5.0


def test_pools_overlap_where_two_or_more_are_busy_at_once():
    rollout = [(0.0, 4.0)]
    teacher = [(1.0, 2.0), (1.5, 3.0), (6.0, 7.0)]  # two requests in flight together count once
    learner = [(2.5, 6.5)]
    # two or more busy: [1, 3] rollout+teacher, [3, 4] rollout+learner, [6, 6.5] teacher+learner
    assert shared_seconds([rollout, teacher, learner], (0.0, 10.0)) == pytest.approx(3.5)
    assert shared_seconds([rollout, teacher, learner], (2.0, 6.2)) == pytest.approx(2.2)  # [2, 4], [6, 6.2]
    assert shared_seconds([rollout, [(4.0, 5.0)]], (0.0, 10.0)) == 0.0  # one ends as the other starts
    assert shared_seconds([rollout], (0.0, 10.0)) == 0.0
