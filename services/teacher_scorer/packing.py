"""Length-sorted packing of sequences into forward passes under a padded-token budget.

Sorting by length before cutting keeps the rows of one pass close in length, so the padding
(rows x longest row - real tokens) stays small.
"""

from collections.abc import Sequence


def pack_by_length(lengths: Sequence[int], token_budget: int, max_rows: int) -> list[list[int]]:
    """Group indices of ``lengths`` into passes with rows x longest <= token_budget and <= max_rows rows.

    Indices are visited longest first; a sequence longer than the budget gets a pass of its own
    (validation keeps such sequences out, this only guarantees progress).
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    passes: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        length = lengths[i]
        grown = max(longest, length) * (len(current) + 1)
        if current and (grown > token_budget or len(current) >= max_rows):
            passes.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, length)
    if current:
        passes.append(current)
    return passes


def padded_tokens(lengths: Sequence[int], passes: Sequence[Sequence[int]]) -> int:
    """Tokens a padded forward of ``passes`` processes (rows x longest row, summed)."""
    return sum(len(p) * max(lengths[i] for i in p) for p in passes)


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
