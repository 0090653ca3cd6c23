"""How a teacher request enters the Serve batch queue: consecutive chunks under a token limit.

The packing of a batch's rows into forward passes is ``services/packing.py``.
"""

from collections.abc import Sequence


def chunk_by_tokens(lengths: Sequence[int], token_limit: int) -> list[list[int]]:
    """Cut indices 0..n-1, in order, into consecutive chunks of at most ``token_limit`` tokens.

    A request enters the Serve batch queue as such chunks, so one huge request never blocks the
    queue and a batch can mix chunks of many requests; a single longer sequence is its own chunk.
    """
    chunks: list[list[int]] = []
    current: list[int] = []
    tokens = 0
    for i, length in enumerate(lengths):
        if current and tokens + length > token_limit:
            chunks.append(current)
            current, tokens = [], 0
        current.append(i)
        tokens += length
    if current:
        chunks.append(current)
    return chunks
