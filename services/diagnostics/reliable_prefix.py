"""The reliable turn prefix (paper Sec. 4.1).

A turn is *supported* in a step when it has at least ``min_survivors`` surviving trajectories and
at least ``min_survivor_frac`` of turn 0's survivors. The reliable prefix is the longest run of
turns 0, 1, ..., R-1 each supported in at least ``min_step_frac`` of the steps. Fractions are
compared as count/total >= threshold, so exact ties (3/30 vs 0.1) hold.
"""

import math
from collections.abc import Sequence


def supported(n_t: int, n_0: int, min_survivors: int, min_survivor_frac: float) -> bool:
    """Turn support in one step."""
    return n_0 > 0 and n_t >= min_survivors and n_t / n_0 >= min_survivor_frac


def support_fractions(
    survivors_per_step: Sequence[Sequence[int]], min_survivors: int, min_survivor_frac: float
) -> list[float]:
    """For each turn, the fraction of steps in which it is supported (a step lacking the turn has n_t = 0)."""
    n_steps = len(survivors_per_step)
    depth = max((len(s) for s in survivors_per_step), default=0)
    return [
        sum(
            1
            for s in survivors_per_step
            if supported(s[t] if t < len(s) else 0, s[0], min_survivors, min_survivor_frac)
        )
        / n_steps
        for t in range(depth)
    ]


def reliable_prefix_length(
    survivors_per_step: Sequence[Sequence[int]],
    min_survivors: int,
    min_survivor_frac: float,
    min_step_frac: float,
) -> int:
    """R: number of leading turns supported in at least ``min_step_frac`` of the steps."""
    length = 0
    for frac in support_fractions(survivors_per_step, min_survivors, min_survivor_frac):
        if frac < min_step_frac:
            break
        length += 1
    return length


def thirds(prefix: int) -> tuple[range, range]:
    """(shallow, deep) thirds of a prefix of length R: [0, ceil(R/3)) and [R - ceil(R/3), R)."""
    size = math.ceil(prefix / 3)
    return range(0, size), range(prefix - size, prefix)
