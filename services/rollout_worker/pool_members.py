"""What the rollout pool's owner knows of its workers, and what it does to bring one up (pure).

``Member``: one record per worker, replaced (never changed in place) by the owner only, so the tuple
of them it publishes after each change can be read from any thread (`turnopd status`, ``size``).
``Start``: one worker's way up (or out), one Ray call at a time, whose answer the owner waits for
beside the chunks in flight, so the other workers keep playing meanwhile.
"""

import math
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal

from services.settings.per_service import RolloutWorkerServiceSettings

# idle: takes the next chunk; playing: a chunk in flight; starting: a Start in flight (a fresh actor,
# a restart Ray made, weights loading); lost: did not come back; gone: taken away by a shrink
MemberState = Literal["idle", "playing", "starting", "lost", "gone"]


@dataclass(frozen=True)
class Member:
    """One worker of the pool: its actor, the settings it was (re)started with, and what it does now."""

    handle: Any
    settings: RolloutWorkerServiceSettings
    incarnation: str | None  # the actor's id of its last (re)start: a new one means Ray restarted it
    state: MemberState = "idle"
    leaving: bool = False  # a shrink takes it away once its chunk or its start is over

    @property
    def live(self) -> bool:
        return self.state not in ("lost", "gone")


class Roster:
    """The pool's members as one tuple, replaced (never changed in place) by the owner only: any
    thread can read ``view``, the tuple of the moment."""

    def __init__(self, members: Sequence[Member] = ()) -> None:
        self.view: tuple[Member, ...] = tuple(members)

    def __len__(self) -> int:
        return len(self.view)

    def __getitem__(self, index: int) -> Member:
        return self.view[index]

    def __iter__(self) -> Iterator[Member]:
        return iter(self.view)

    def set(self, index: int, member: Member) -> None:
        if not 0 <= index < len(self.view):
            raise IndexError(f"no member {index} in a roster of {len(self.view)}")
        self.view = (*self.view[:index], member, *self.view[index + 1 :])

    def append(self, member: Member) -> None:
        self.view = (*self.view, member)

    def truncate(self, size: int) -> None:
        self.view = self.view[:size]


@dataclass(frozen=True)
class Published:
    """The weights every worker is to hold: an ObjectRef (None before the first publish) and its version."""

    ref: Any
    version: int


@dataclass(frozen=True)
class Gateway:
    """The env gateway requests go to; ``generation`` counts the switches (a chunk remembers its own)."""

    url: str
    generation: int


# fresh: a new actor (a replacement, a growth); recover: an actor Ray restarts after a crash;
# load: a live actor given newly published weights; retire: a killed actor whose name is being freed
StartKind = Literal["fresh", "recover", "load", "retire"]
# name: wait for the worker's actor name to be free (then create the actor, or end); ready, held,
# load: the actor's ``ready``, ``weights_version``, ``load_weights`` call in flight; parked: a new
# worker of a growth that is ready, waiting for the others
Step = Literal["name", "ready", "held", "load", "parked"]


@dataclass
class Start:
    """Worker ``index`` on its way up or out; changed by the owner only."""

    index: int
    kind: StartKind
    step: Step
    handle: Any  # the actor being started (None while a replacement waits for the name)
    settings: RolloutWorkerServiceSettings
    deadline: float = math.inf  # when the call in flight (or the name wait) is given up
    timeout_s: float = math.inf  # a fresh start's limit for each call
    late: str = ""  # the error a fresh start that passes its deadline ends with
    until: float = math.inf  # when a recovery gives the worker up
    ref: Any = None  # the call in flight
    retry_at: float | None = None  # a step without a call: when it is tried again (a name check)
    dead_answers: int = 0  # "actor died" answers while Ray restarts it
    version: int = 0  # the version of the weights load in flight
    answer: "Future[Any] | None" = None  # a replacement's: answered when the start ends
    before: Member | None = None  # a replaced worker as it was (restored if its replacement fails)
    error: BaseException | None = None  # a failed fresh start ends with it once the name is free
