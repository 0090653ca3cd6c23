"""The rollout pool's counters of what went wrong and how it coped."""

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class PoolStats:
    """What went wrong so far and how the pool coped (changed by the pool's owner, read by anyone)."""

    worker_deaths: int = 0
    replays: int = 0  # chunks played again after a death or a stale worker
    weight_reloads: int = 0  # restarted workers brought back to the published version
    failed_chunks: int = 0
    overdue_kills: int = 0  # workers killed for playing one chunk past rollout_worker.chunk_timeout_s
    env_replays: int = 0  # chunks played again because the env gateway was replaced under them
    env_lost_replays: int = 0  # chunks played again because the gateway lost episodes (env_lost)
    crashes_by_worker: Counter[int] = field(default_factory=Counter)  # deaths seen, or found restarted
    replacements_by_worker: Counter[int] = field(default_factory=Counter)
