"""Length-sorted packing stays under the token budget and wastes little padding."""

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from services.packing import pack_by_length, padded_tokens


def cost(lengths, passes, overhead):
    return padded_tokens(lengths, passes) + overhead * len(passes)


def brute_force_best(lengths, budget, max_rows, overhead):
    """Least cost over every contiguous split of the longest-first order."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    best = None
    for cuts in itertools.product([False, True], repeat=len(order) - 1):
        passes, current = [], [order[0]]
        for i, cut_here in zip(order[1:], cuts, strict=True):
            if cut_here:
                passes.append(current)
                current = []
            current.append(i)
        passes.append(current)
        if all(len(p) == 1 or (len(p) <= max_rows and len(p) * lengths[p[0]] <= budget) for p in passes):
            c = cost(lengths, passes, overhead)
            best = c if best is None else min(best, c)
    return best


def test_sorted_packing_example():
    lengths = [10, 100, 12, 95, 11, 98]
    passes = pack_by_length(lengths, token_budget=300, max_rows=8, pass_overhead=50)
    assert passes == [[1, 5, 3], [2, 4, 0]]
    assert padded_tokens(lengths, passes) == 3 * 100 + 3 * 12


def test_overhead_trades_padding_against_passes():
    lengths = [100, 60]
    assert pack_by_length(lengths, 1000, 8, pass_overhead=0) == [[0], [1]]
    assert pack_by_length(lengths, 1000, 8, pass_overhead=50) == [[0, 1]]


def test_row_cap_and_oversized_sequences():
    assert [len(p) for p in pack_by_length([5, 5, 5, 5, 5], token_budget=1000, max_rows=2)] == [1, 2, 2]
    assert pack_by_length([50, 3], token_budget=10, max_rows=8) == [[0], [1]]
    assert pack_by_length([], token_budget=10, max_rows=8) == []


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 300), min_size=1, max_size=80),
    budget=st.integers(300, 5000),
    max_rows=st.integers(1, 64),
    overhead=st.integers(0, 500),
)
def test_packing_covers_every_index_once_within_limits(lengths, budget, max_rows, overhead):
    passes = pack_by_length(lengths, budget, max_rows, overhead)
    assert sorted(i for p in passes for i in p) == list(range(len(lengths)))
    for p in passes:
        assert len(p) <= max_rows
        assert len(p) * max(lengths[i] for i in p) <= budget


@settings(max_examples=150, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 60), min_size=1, max_size=9),
    budget=st.integers(60, 300),
    max_rows=st.integers(1, 6),
    overhead=st.integers(0, 80),
)
def test_packing_is_the_cheapest_contiguous_split(lengths, budget, max_rows, overhead):
    passes = pack_by_length(lengths, budget, max_rows, overhead)
    assert cost(lengths, passes, overhead) == brute_force_best(lengths, budget, max_rows, overhead)


def test_mixed_lengths_waste_little():
    rng = np.random.default_rng(0)
    lengths = rng.integers(32, 257, size=256).tolist()
    passes = pack_by_length(lengths, token_budget=8192, max_rows=64)
    assert padded_tokens(lengths, passes) / sum(lengths) - 1 < 0.08
    arrival = [list(range(i, min(i + 32, 256))) for i in range(0, 256, 32)]
    assert padded_tokens(lengths, arrival) / sum(lengths) - 1 > 0.4
