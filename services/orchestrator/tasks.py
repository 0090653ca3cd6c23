"""Which tasks a step plays (pure): seeded, reproducible, task types round-robin."""

import random
from collections.abc import Sequence

from services.contracts.rollout import EpisodeTask


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
