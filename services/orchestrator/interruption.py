"""Attributing lost training time to a restart (``bench/restart_interruption.py``); pure functions.

Step k's interval is the wall time between the completions of steps k-1 and k; a restart costs
the extra interval time, over an identical run without restarts, of the steps its window overlaps.
"""

from collections.abc import Mapping, Sequence


def intervals(step_ends: Sequence[float], first_step: int) -> dict[int, float]:
    """Interval of every step after the first (``step_ends[i]``: completion of step ``first_step + i``)."""
    return {first_step + i: step_ends[i] - step_ends[i - 1] for i in range(1, len(step_ends))}


def overlapped_steps(step_ends: Sequence[float], first_step: int, start: float, end: float) -> list[int]:
    """Steps whose interval (end of the previous step, own end] overlaps the window [start, end]."""
    end = max(end, start + 1e-9)  # an instant (a SIGKILL) still lies inside one interval
    return [
        first_step + i for i in range(1, len(step_ends)) if step_ends[i - 1] < end and start < step_ends[i]
    ]


def lost_seconds(base: Mapping[int, float], chaos: Mapping[int, float], steps: Sequence[int]) -> float:
    """Extra wall time of ``steps`` in the run with restarts over the baseline run."""
    return sum(chaos[k] - base[k] for k in steps)
