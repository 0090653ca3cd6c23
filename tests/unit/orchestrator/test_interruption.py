"""Attribution of lost time to the steps a restart overlaps (bench/restart_interruption.py)."""

import pytest

from services.orchestrator.interruption import intervals, lost_seconds, overlapped_steps


def test_intervals_start_at_the_second_step():
    assert intervals([10.0, 14.0, 19.5], first_step=1) == {2: 4.0, 3: 5.5}


def test_overlapped_steps():
    ends = [10.0, 14.0, 19.0, 23.0]  # steps 1..4 completed at these times
    assert overlapped_steps(ends, 1, 15.0, 16.0) == [3]  # inside step 3
    assert overlapped_steps(ends, 1, 13.0, 20.0) == [2, 3, 4]  # spans three steps
    assert overlapped_steps(ends, 1, 14.0, 14.5) == [3]  # a learner swap right after step 2
    assert overlapped_steps(ends, 1, 17.0, 17.0) == [3]  # a SIGKILL instant
    assert overlapped_steps(ends, 1, 30.0, 31.0) == []


def test_lost_seconds_is_the_excess_over_the_baseline():
    base = {2: 4.0, 3: 5.0, 4: 4.0}
    chaos = {2: 4.1, 3: 9.0, 4: 6.5}
    assert lost_seconds(base, chaos, [3, 4]) == pytest.approx(6.5)
    assert lost_seconds(base, chaos, []) == 0.0
