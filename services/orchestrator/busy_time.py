"""How long a service was busy during a step, from the intervals its requests were in flight (pure).

An interval is ``(start, end)`` in one clock's seconds (``time.perf_counter``). Requests in flight
at the same time count once: the busy time is the length of the intervals' union. Pools overlap
where two or more of them are busy at the same time.
"""

from collections.abc import Iterable

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
