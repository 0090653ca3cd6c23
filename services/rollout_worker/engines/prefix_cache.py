"""Key/value states kept across ``generate`` calls, so a multi-turn prompt only prefills its new tokens.

Turn t+1's prompt is turn t's prompt, plus the response the engine sampled, plus the observation.
After each call the engine stores, per request, the keys and values of every token it fed to the
model (the prompt and all sampled tokens but the last); the next call looks up the longest stored
sequence that is a proper prefix of a prompt and prefills only the rest. Entries are evicted least
recently used first once ``max_bytes`` is exceeded, and all are dropped when the weights change.
"""

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from transformers import DynamicCache


_SIGNATURE_TOKENS = 8


def _signature(token_ids: Sequence[int], length: int) -> tuple[int, tuple[int, ...]]:
    return length, tuple(token_ids[max(0, length - _SIGNATURE_TOKENS) : length])


@dataclass(frozen=True)
class CachedPrefix:
    """The keys and values (per layer, ``[kv_heads, len(token_ids), head_dim]``) of ``token_ids``."""

    token_ids: tuple[int, ...]
    keys: "list[torch.Tensor]"
    values: "list[torch.Tensor]"

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


def stack_prefixes(
    hits: "Sequence[CachedPrefix | None]", width: int
) -> "list[tuple[torch.Tensor, torch.Tensor]]":
    """Per layer, the hits' keys and values right-aligned in ``width`` positions (``[B, heads, width, dim]``).

    Rows without a hit (and the left of shorter hits) are zeros, to be masked out.
    """
    template = next(hit for hit in hits if hit is not None)
    layers = []
    for layer in range(len(template.keys)):
        heads, _, head_dim = template.keys[layer].shape
        keys = template.keys[layer].new_zeros((len(hits), heads, width, head_dim))
        values = template.values[layer].new_zeros((len(hits), heads, width, template.values[layer].shape[2]))
        for row, hit in enumerate(hits):
            if hit is not None:
                start = width - len(hit.token_ids)
                keys[row, :, start:, :] = hit.keys[layer]
                values[row, :, start:, :] = hit.values[layer]
        layers.append((keys, values))
    return layers


def layer_states(cache: "DynamicCache") -> "list[tuple[torch.Tensor, torch.Tensor]]":
    """Each layer's ``[batch, kv_heads, positions, head_dim]`` keys and values (full-attention caches)."""
    import torch

    states = []
    for layer in cache.layers:
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if not isinstance(keys, torch.Tensor) or not isinstance(values, torch.Tensor):
            raise TypeError(f"cache layer {type(layer).__name__} holds no key/value tensors")
        states.append((keys, values))
    return states


class PrefixKVStore:
    """Least-recently-used store of ``CachedPrefix`` entries under a byte budget."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[int, ...], CachedPrefix] = OrderedDict()
        # (length, last tokens) -> entries: a lookup hashes a few tokens per stored length, not whole prefixes
        self._index: dict[tuple[int, tuple[int, ...]], set[tuple[int, ...]]] = {}
        self._lengths: dict[int, int] = {}  # entry length -> number of entries of that length
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def lookup(self, prompt: Sequence[int]) -> CachedPrefix | None:
        """The longest stored sequence that is a prefix of ``prompt`` and shorter than it."""
        for length in sorted(self._lengths, reverse=True):
            if length >= len(prompt):
                continue
            for token_ids in self._index.get(_signature(prompt, length), ()):
                if all(a == b for a, b in zip(token_ids, prompt, strict=False)):
                    self._entries.move_to_end(token_ids)
                    return self._entries[token_ids]
        return None

    def add(self, entry: CachedPrefix) -> None:
        """Store ``entry`` (replacing one with the same tokens), then evict down to the budget."""
        if entry.nbytes > self.max_bytes or not entry.token_ids:
            return
        self._discard(entry.token_ids)
        self._entries[entry.token_ids] = entry
        self._index.setdefault(_signature(entry.token_ids, len(entry.token_ids)), set()).add(entry.token_ids)
        self._lengths[len(entry.token_ids)] = self._lengths.get(len(entry.token_ids), 0) + 1
        self._bytes += entry.nbytes
        while self._bytes > self.max_bytes:
            self._discard(next(iter(self._entries)))

    def clear(self) -> None:
        self._entries.clear()
        self._index.clear()
        self._lengths.clear()
        self._bytes = 0

    def _discard(self, token_ids: tuple[int, ...]) -> None:
        entry = self._entries.pop(token_ids, None)
        if entry is None:
            return
        self._bytes -= entry.nbytes
        signature = _signature(token_ids, len(token_ids))
        self._index[signature].discard(token_ids)
        if not self._index[signature]:
            del self._index[signature]
        self._lengths[len(token_ids)] -= 1
        if not self._lengths[len(token_ids)]:
            del self._lengths[len(token_ids)]
