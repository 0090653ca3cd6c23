"""Deterministic seeds for rollouts: a request's seed follows from its tasks, each turn's from that.

Seeds are derived by hashing (not Python's ``hash``, which is salted per process), so a request
re-run on a restarted worker, or on another worker holding the same weights, samples the same way.
"""

import hashlib
from collections.abc import Sequence

from services.contracts.rollout import EpisodeTask

_SEED_BITS = 63


def derive_seed(*parts: object) -> int:
    """A non-negative 63-bit seed from the ``repr`` of ``parts``, identical in every process."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - _SEED_BITS)


def tasks_seed(tasks: Sequence[EpisodeTask]) -> int:
    """The sampling seed of a request that did not give one: a function of its tasks, in order."""
    return derive_seed(
        "rollout-request", *((t.env, t.split, t.seed, t.task_type, t.sample_index) for t in tasks)
    )


def turn_seed(seed: int, turn: int) -> int:
    """The seed of the batched generation call of ``turn`` in a request seeded with ``seed``."""
    return derive_seed("turn", seed, turn)
