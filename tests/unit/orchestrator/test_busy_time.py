import pytest

from services.orchestrator.busy_time import busy_seconds, merged, overlap_seconds


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
