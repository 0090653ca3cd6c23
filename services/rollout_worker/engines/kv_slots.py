"""Persistent per-episode KV slots: one contiguous key/value buffer per running sequence, written in place.

Turn t+1's prompt is turn t's prompt, plus the response the engine sampled, plus the observation.
A slot remembers the tokens whose keys and values it holds (the prompt and every sampled token but
the last); the next call gives each prompt the slot whose whole sequence begins it, and prefills
only the rest, into the same buffer. Nothing is concatenated per token and no prefix is copied out
and back in: a buffer is copied only when it grows (geometrically, so rarely). Only a sequence's
own continuation reuses its states, never a prefix that happens to be shared with another episode
(the instructions that open every game): a prompt's numbers then do not depend on what the worker
played before, and seeded runs replay bit for bit.

Lifetime: a ``generate`` call continues the episodes it is given; a slot that no prompt of a call
continued belongs to an episode that ended (the agent loop puts every running episode in every
call): the call's new prompts may take it over, and whatever is left of it is emptied when the call
ends. Empty buffers are kept for reuse up to ``max_bytes`` (fresh allocations fault in their
pages); ``clear`` empties every slot when the weights change.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

_CAPACITY_QUANTUM = 256  # positions: buffers are sized in steps of this, and grow by half at least


@dataclass(frozen=True)
class SlotShape:
    """What one position of a slot holds: per layer, ``kv_heads`` keys and values of ``head_dim``."""

    layers: int
    kv_heads: int
    head_dim: int
    dtype: "torch.dtype"
    device: "torch.device"

    def nbytes(self, capacity: int) -> int:
        import torch

        element = torch.empty((), dtype=self.dtype).element_size()
        return self.layers * 2 * self.kv_heads * capacity * self.head_dim * element


@dataclass(eq=False)
class KVSlot:
    """One sequence's keys and values: ``kv[layer, 0 | 1, kv_head, position, dim]``; ``tokens`` fill
    positions ``[0, len(tokens))``."""

    kv: "torch.Tensor"
    tokens: list[int] = field(default_factory=list)

    @property
    def capacity(self) -> int:
        return int(self.kv.shape[3])

    @property
    def nbytes(self) -> int:
        return self.kv.numel() * self.kv.element_size()

    def keys(self, layer: int) -> "torch.Tensor":
        """``[kv_heads, capacity, head_dim]`` (a view)."""
        return self.kv[layer, 0]

    def values(self, layer: int) -> "torch.Tensor":
        return self.kv[layer, 1]


@dataclass(frozen=True)
class Claim:
    """A prompt's slot for one call: positions ``[0, reused)`` already hold the prompt's prefix."""

    slot: KVSlot
    reused: int


class SlotPool:
    """The slots of one engine, claimed per call and released when their sequence stops coming back."""

    def __init__(self, shape: SlotShape, max_bytes: int) -> None:
        self.shape = shape
        self.max_bytes = max_bytes
        self._slots: list[KVSlot] = []

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def nbytes(self) -> int:
        return sum(slot.nbytes for slot in self._slots)

    @property
    def held_tokens(self) -> int:
        """Positions holding a remembered sequence (empty slots hold none)."""
        return sum(len(slot.tokens) for slot in self._slots)

    def claim(self, prompts: Sequence[Sequence[int]], max_new_tokens: int) -> list[Claim]:
        """One slot per prompt, each with room for the prompt and ``max_new_tokens`` more positions.

        A prompt continues the unclaimed slot holding the longest proper prefix of it (at least one
        token is left to prefill: its logits start the response); otherwise it takes a slot that no
        prompt continues, else a new one.
        """
        claims: list[Claim | None] = [None] * len(prompts)
        taken: set[int] = set()
        matches = []  # (held, prompt, slot): the longest are served first, ties in prompt order
        for i, prompt in enumerate(prompts):
            for s, slot in enumerate(self._slots):
                held = len(slot.tokens)
                if 0 < held < len(prompt) and list(prompt[:held]) == slot.tokens:
                    matches.append((held, i, s))
        for shared, i, s in sorted(matches, key=lambda m: (-m[0], m[1], m[2])):
            if claims[i] is None and s not in taken:
                taken.add(s)
                claims[i] = Claim(self._slots[s], shared)
        for i, prompt in enumerate(prompts):
            if claims[i] is None:
                s = self._spare_slot(taken, len(prompt) + max_new_tokens)
                taken.add(s)
                claims[i] = Claim(self._slots[s], 0)
        done = [c for c in claims if c is not None]
        for claim, prompt in zip(done, prompts, strict=True):
            self._fit(claim, len(prompt) + max_new_tokens)
            del claim.slot.tokens[claim.reused :]  # a taken-over slot: its old sequence is overwritten
        return done

    def settle(self, claims: Sequence[Claim]) -> None:
        """After a call: empty the slots it did not continue, then drop empty buffers over budget,
        then (still over budget) forget the largest sequences."""
        kept = {id(c.slot) for c in claims}
        for slot in self._slots:
            if id(slot) not in kept:
                slot.tokens.clear()
        self._trim()

    def clear(self) -> None:
        """Forget every sequence (e.g. the weights changed); buffers stay for reuse within budget."""
        for slot in self._slots:
            slot.tokens.clear()
        self._trim()

    def _trim(self) -> None:
        total = self.nbytes
        for slot in sorted(self._slots, key=lambda s: (bool(s.tokens), -s.nbytes)):
            if total <= self.max_bytes:
                break
            slot.tokens.clear()
            self._slots.remove(slot)
            total -= slot.nbytes

    def _spare_slot(self, taken: set[int], need: int) -> int:
        """Index of an unclaimed slot to reuse (the smallest that fits), or a new one."""
        free = [s for s in range(len(self._slots)) if s not in taken]
        fits = [s for s in free if self._slots[s].capacity >= need]
        if fits:
            return min(fits, key=lambda s: self._slots[s].capacity)
        if free:  # none fits: grow the largest
            return max(free, key=lambda s: self._slots[s].capacity)
        self._slots.append(KVSlot(self._buffer(_round_up(need))))
        return len(self._slots) - 1

    def _fit(self, claim: Claim, need: int) -> None:
        """Grow the claimed slot's buffer to hold ``need`` positions, keeping its reused prefix."""
        slot = claim.slot
        if slot.capacity >= need:
            return
        grown = self._buffer(_round_up(max(need, slot.capacity * 3 // 2)))
        if claim.reused:
            grown[:, :, :, : claim.reused].copy_(slot.kv[:, :, :, : claim.reused])
        slot.kv = grown

    def _buffer(self, capacity: int) -> "torch.Tensor":
        import torch

        s = self.shape
        return torch.empty((s.layers, 2, s.kv_heads, capacity, s.head_dim), dtype=s.dtype, device=s.device)


def _round_up(positions: int) -> int:
    return -(-positions // _CAPACITY_QUANTUM) * _CAPACITY_QUANTUM
