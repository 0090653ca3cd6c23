"""The operations on a rollout pool, as messages its owner applies at a safe point (pure).

Each is posted by the thread that calls the pool's method (`turnopd restart`, `scale`, the gateway
watchdog, the publishing lane) and applied by whichever thread owns the pool (``pool_owner.py``):
between two chunks of a ``play``, or by the caller itself when no play runs. None crosses a process.
"""

from dataclasses import dataclass
from typing import Any

from services.settings.per_service import RolloutWorkerServiceSettings


@dataclass(frozen=True)
class ReplaceWorker:
    """Swap worker ``index`` for a fresh actor (``settings``, else its own) at the published weights."""

    index: int
    settings: RolloutWorkerServiceSettings | None


@dataclass(frozen=True)
class Resize:
    """Grow or shrink the pool to ``size`` workers; new ones start with ``settings``."""

    size: int
    settings: RolloutWorkerServiceSettings


@dataclass(frozen=True)
class SwitchGateway:
    """Play every later request against the env gateway at ``url``."""

    url: str


@dataclass(frozen=True)
class PublishWeights:
    """Load ``weights_ref`` (an ObjectRef of a state dict, or the dict) into every worker as ``version``."""

    weights_ref: Any
    version: int
    rewind: bool


@dataclass(frozen=True)
class KeepWeights:
    """Hold ``owned`` (a copy this process owns) for the published ``version``, if it is still the published one."""

    owned: Any
    version: int


@dataclass(frozen=True)
class Close:
    """Kill every worker's actor for good and forget them; every later message is refused."""


PoolMessage = ReplaceWorker | Resize | SwitchGateway | PublishWeights | KeepWeights | Close
