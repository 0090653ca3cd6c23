"""Which tasks a step plays (pure): seeded, reproducible, task types round-robin."""

import math
import random
from collections.abc import Sequence

from services.contracts.rollout import EpisodeTask
from services.settings.task_mix import TaskSource


def step_tasks(
    env: str,
    split: str,
    batch: int,
    n: int,
    step: int,
    seed: int,
    task_types: Sequence[str | None],
) -> list[EpisodeTask]:
    """``batch`` trajectories = ceil(batch / n) tasks x n samples; game seeds drawn from (seed, step)."""
    rng = random.Random(f"{seed}:{split}:{step}")
    n_tasks = -(-batch // n)
    tasks: list[EpisodeTask] = []
    for i in range(n_tasks):
        game_seed = rng.randrange(2**31)
        task_type = task_types[i % len(task_types)] if task_types else None
        tasks.extend(
            EpisodeTask(env=env, split=split, seed=game_seed, task_type=task_type, sample_index=j)
            for j in range(n)
        )
    return tasks[:batch]


def source_counts(shares: Sequence[float], batch: int) -> list[int]:
    """Trajectories per source: ``batch`` split by the shares, largest remainders rounded up (ties to
    the earlier source), so the counts sum to ``batch``."""
    exact = [share * batch for share in shares]
    counts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(shares)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in by_remainder[: batch - sum(counts)]:
        counts[i] += 1
    return counts


def mixed_step_tasks(
    sources: Sequence[TaskSource], batch: int, n: int, step: int, seed: int
) -> list[EpisodeTask]:
    """Step ``step``'s tasks of every source, in source order: each source's share of ``batch``
    (``source_counts``), drawn as ``step_tasks`` on its env, split and task types, in its
    observation format (``task_reminder``). One source gives ``step_tasks`` exactly."""
    if len(sources) == 1:
        only = sources[0]
        return step_tasks(only.env, only.split, batch, n, step, seed, only.task_types)
    tasks: list[EpisodeTask] = []
    for source, count in zip(sources, source_counts([s.share for s in sources], batch), strict=True):
        if count:
            drawn = step_tasks(source.env, source.split, count, n, step, seed, source.task_types)
            tasks += [t.model_copy(update={"task_reminder": source.task_reminder}) for t in drawn]
    return tasks
