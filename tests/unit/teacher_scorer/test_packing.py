"""Length-sorted packing stays under the token budget and wastes little padding."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from services.teacher_scorer.packing import chunk_by_tokens, pack_by_length, padded_tokens


def test_sorted_packing_example():
    lengths = [10, 100, 12, 95, 11, 98]
    passes = pack_by_length(lengths, token_budget=300, max_rows=8)
    assert passes == [[1, 5, 3], [2, 4, 0]]
    assert padded_tokens(lengths, passes) == 3 * 100 + 3 * 12


def test_row_cap_and_oversized_sequences():
    assert pack_by_length([5, 5, 5, 5, 5], token_budget=1000, max_rows=2) == [[0, 1], [2, 3], [4]]
    assert pack_by_length([50, 3], token_budget=10, max_rows=8) == [[0], [1]]


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 300), min_size=1, max_size=80),
    budget=st.integers(300, 5000),
    max_rows=st.integers(1, 64),
)
def test_packing_covers_every_index_once_within_limits(lengths, budget, max_rows):
    passes = pack_by_length(lengths, budget, max_rows)
    assert sorted(i for p in passes for i in p) == list(range(len(lengths)))
    for p in passes:
        assert len(p) <= max_rows
        assert len(p) * max(lengths[i] for i in p) <= budget
    # Sorting keeps waste small: every pass but the last is full to within one row's worth.
    waste = padded_tokens(lengths, passes) - sum(lengths)
    unsorted_waste = len(lengths) * max(lengths) - sum(lengths)
    assert waste <= unsorted_waste


def test_sorting_beats_arrival_order_on_mixed_lengths():
    rng = np.random.default_rng(0)
    lengths = rng.integers(10, 500, size=256).tolist()
    passes = pack_by_length(lengths, token_budget=4096, max_rows=64)
    arrival = [list(range(i, min(i + 8, 256))) for i in range(0, 256, 8)]
    sorted_waste = padded_tokens(lengths, passes) / sum(lengths) - 1
    arrival_waste = padded_tokens(lengths, arrival) / sum(lengths) - 1
    assert sorted_waste < 0.1 < arrival_waste


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(1, 300), min_size=1, max_size=80), limit=st.integers(1, 1000))
def test_chunks_are_consecutive_and_within_the_limit(lengths, limit):
    chunks = chunk_by_tokens(lengths, limit)
    assert [i for c in chunks for i in c] == list(range(len(lengths)))
    for c in chunks:
        assert len(c) == 1 or sum(lengths[i] for i in c) <= limit
