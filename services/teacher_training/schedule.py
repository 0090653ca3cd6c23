"""The SFT step plan: which episodes each optimizer step trains on, and its learning rate.

Pure module: standard library only.
"""

import math
import random

from services.errors import InputError
from services.settings.sft import ScheduleKind


def step_batches(num_episodes: int, epochs: float, batch_episodes: int, seed: int) -> list[list[int]]:
    """Episode indices per optimizer step: a fresh seeded shuffle per epoch, ``epochs`` may be fractional.

    The episodes of all passes are laid end to end and cut into batches of ``batch_episodes``
    (the last batch may be smaller), so no episode repeats within a batch unless the batch is
    larger than the dataset.
    """
    if num_episodes < 1:
        raise InputError("training needs at least one episode")
    if epochs <= 0 or batch_episodes < 1:
        raise InputError(f"epochs must be > 0 and batch_episodes >= 1, got {epochs} and {batch_episodes}")
    rng = random.Random(seed)
    total = max(1, round(epochs * num_episodes))
    order: list[int] = []
    while len(order) < total:
        epoch = list(range(num_episodes))
        rng.shuffle(epoch)
        order.extend(epoch)
    order = order[:total]
    return [order[i : i + batch_episodes] for i in range(0, total, batch_episodes)]


def learning_rate(
    step: int, total_steps: int, peak: float, warmup_steps: int, schedule: ScheduleKind, min_ratio: float
) -> float:
    """The learning rate of optimizer step ``step`` (0-based): linear warm-up, then the decay."""
    if not 0 <= step < total_steps:
        raise InputError(f"step {step} outside [0, {total_steps})")
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    decay_steps = total_steps - warmup_steps
    progress = (step - warmup_steps) / max(1, decay_steps - 1)
    floor = peak * min_ratio
    match schedule:
        case "constant":
            return peak
        case "linear":
            return floor + (peak - floor) * (1.0 - progress)
        case "cosine":
            return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
        case _:
            raise InputError(f"unknown schedule {schedule!r}; use cosine, linear or constant")
