"""A request enters the Serve batch queue as consecutive chunks under the token limit."""

from hypothesis import given, settings
from hypothesis import strategies as st

from services.teacher_scorer.packing import chunk_by_tokens


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(1, 300), min_size=1, max_size=80), limit=st.integers(1, 1000))
def test_chunks_are_consecutive_and_within_the_limit(lengths, limit):
    chunks = chunk_by_tokens(lengths, limit)
    assert [i for c in chunks for i in c] == list(range(len(lengths)))
    for c in chunks:
        assert len(c) == 1 or sum(lengths[i] for i in c) <= limit
