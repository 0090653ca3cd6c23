"""How long a service was busy during a step, from the intervals its requests were in flight.

An interval is ``(start, end)`` in one clock's seconds (``time.perf_counter``). Requests in flight
at the same time count once: the busy time is the length of the intervals' union. Pools overlap
where two or more of them are busy at the same time. The functions are pure; ``PoolActivity``
records the work of several pools as it happens, from several threads.
"""

import itertools
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

Interval = tuple[float, float]


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of ``intervals`` as disjoint intervals, in order (empty ones left out)."""
    out: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def busy_seconds(intervals: Iterable[Interval]) -> float:
    """Length of the union of ``intervals``."""
    return sum(end - start for start, end in merged(intervals))


def overlap_seconds(intervals: Iterable[Interval], window: Interval) -> float:
    """Length of the union of ``intervals`` that lies inside ``window``."""
    low, high = window
    return sum(max(0.0, min(end, high) - max(start, low)) for start, end in merged(intervals))


def shared_seconds(pools: Iterable[Iterable[Interval]], window: Interval) -> float:
    """Seconds inside ``window`` during which two or more of ``pools`` were busy at once.

    Each element of ``pools`` is one pool's intervals; its own requests in flight together count once.
    """
    low, high = window
    events: list[tuple[float, int]] = []
    for intervals in pools:
        for start, end in merged(intervals):
            start, end = max(start, low), min(end, high)
            if end > start:
                events += [(start, 1), (end, -1)]
    events.sort()  # at the same instant an end (-1) comes before a start (+1)
    shared, busy, last = 0.0, 0, low
    for at, change in events:
        if busy >= 2:
            shared += at - last
        busy, last = busy + change, at
    return shared


class PoolActivity:
    """When each pool (e.g. rollout, teacher, learner) was busy, from several threads.

    ``busy(pool)`` marks a stretch of work as it happens: ``within`` counts work still going on up
    to the end of its window, so a play that spans two steps' windows counts in both.
    """

    def __init__(self, pools: Sequence[str] = ("rollout", "teacher", "learner")) -> None:
        self._lock = threading.Lock()
        self._closed: dict[str, list[Interval]] = {pool: [] for pool in pools}
        self._open: dict[int, tuple[str, float]] = {}  # token -> (pool, start)
        self._tokens = itertools.count()

    @contextmanager
    def busy(self, pool: str) -> Iterator[None]:
        """``with activity.busy("rollout"): ...``: the pool is busy for the block."""
        if pool not in self._closed:
            raise KeyError(f"unknown pool {pool!r}")
        token = next(self._tokens)
        with self._lock:
            self._open[token] = (pool, time.perf_counter())
        try:
            yield
        finally:
            with self._lock:
                _, start = self._open.pop(token)
                self._closed[pool].append((start, time.perf_counter()))

    def within(self, window: Interval) -> tuple[dict[str, float], float]:
        """Each pool's busy seconds inside ``window``, and the seconds two or more were busy at once.

        Work that ended before ``window`` is forgotten: windows come in time order.
        """
        with self._lock:
            for pool, intervals in self._closed.items():
                self._closed[pool] = [i for i in intervals if i[1] > window[0]]
            snapshot = {pool: list(intervals) for pool, intervals in self._closed.items()}
            for pool, start in self._open.values():
                snapshot[pool].append((start, window[1]))
        busy = {pool: overlap_seconds(intervals, window) for pool, intervals in snapshot.items()}
        return busy, shared_seconds(snapshot.values(), window)
