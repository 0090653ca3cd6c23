"""How busy the step's pools (rollout, teacher, learner) were, from the steps' recorded times (pure).

A step records the seconds of its wall time (``total_s``) each pool was busy, and the seconds two
or more were busy at once (``StepTimes.*_busy_s``, ``overlap_s``); logs written before they were
recorded leave them out, and such steps are skipped here.
"""

from collections.abc import Sequence

from services.contracts.orchestrator import PoolLoad, StepTimes

POOLS = ("rollout", "teacher", "learner")


def pool_busy_seconds(times: StepTimes) -> dict[str, float] | None:
    """Seconds each pool was busy during the step; None unless the step recorded all of them."""
    busy = {"rollout": times.rollout_busy_s, "teacher": times.teacher_busy_s, "learner": times.learner_busy_s}
    if times.overlap_s is None or any(seconds is None for seconds in busy.values()):
        return None
    return {pool: float(seconds or 0.0) for pool, seconds in busy.items()}


def pool_load(steps: Sequence[StepTimes]) -> PoolLoad | None:
    """Shares of the steps' summed wall time each pool was busy (None: no step recorded them)."""
    recorded = [(t, busy) for t in steps if (busy := pool_busy_seconds(t)) is not None]
    if not recorded:
        return None
    wall = sum(t.total_s for t, _ in recorded)

    def share(seconds: float) -> float:
        return min(1.0, seconds / wall) if wall > 0 else 0.0

    return PoolLoad(
        wall_s=wall,
        busy={pool: share(sum(busy[pool] for _, busy in recorded)) for pool in POOLS},
        overlap=share(sum(t.overlap_s or 0.0 for t, _ in recorded)),
    )
