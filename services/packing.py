"""Length-sorted packing of right-padded sequences into forward passes under a padded-token budget.

Rows are sorted longest first and cut into contiguous passes; the cut points minimise the total
cost ``sum over passes of (rows x longest row + pass_overhead)``, found exactly by dynamic
programming. ``pass_overhead`` (in token-equivalents) prices the fixed cost of a forward pass, so
the packing neither pads short rows up to long ones (greedy filling to the budget wastes a quarter
of the compute on mixed lengths) nor splits into needlessly many small passes.

The cost model holds for passes run without a padding mask: right padding under causal attention
needs none (``services/learner/objective.py``, ``services/teacher_scorer/transformers_engine.py``),
so a pass costs its rows x longest tokens. Shared by the teacher's scorer and the learner.
"""

from collections.abc import Sequence

import numpy as np


def pack_by_length(
    lengths: Sequence[int], token_budget: int, max_rows: int, pass_overhead: int = 256
) -> list[list[int]]:
    """Group indices of ``lengths`` into passes with rows x longest <= token_budget and <= max_rows rows.

    A sequence longer than the budget gets a pass of its own (validation keeps such sequences out;
    this only guarantees progress).
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    sorted_len = np.array([lengths[i] for i in order], dtype=np.int64)
    n = len(order)
    # best[j]: least cost of packing the j longest rows; cut[j]: where their last pass starts.
    best = np.zeros(n + 1, dtype=np.int64)
    cut = np.zeros(n + 1, dtype=np.int64)
    for j in range(1, n + 1):
        starts = np.arange(max(0, j - max_rows), j)
        rows = j - starts
        padded = rows * sorted_len[starts]  # the first row of a pass is its longest
        fits = (padded <= token_budget) | (rows == 1)
        cost = np.where(fits, best[starts] + padded + pass_overhead, np.iinfo(np.int64).max)
        k = int(np.argmin(cost))
        best[j], cut[j] = cost[k], starts[k]
    passes: list[list[int]] = []
    j = n
    while j > 0:
        i = int(cut[j])
        passes.append(order[i:j])
        j = i
    return passes[::-1]


def padded_tokens(lengths: Sequence[int], passes: Sequence[Sequence[int]]) -> int:
    """Tokens a padded forward of ``passes`` processes (rows x longest row, summed)."""
    return sum(len(p) * max(lengths[i] for i in p) for p in passes)
