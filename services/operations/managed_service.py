"""The lifecycle interface every service of a run sits behind: start, stop, replace (a fresh process,
optionally with new settings), scale, and health (their rows of `turnopd status`).

Each ``ManagedService`` (one module per service beside this one: ``redis_ops``, ``controller_ops``,
``env_gateway_ops``, ``teacher_ops``, ``rollout_pool_ops``, ``learner_ops``) owns its live process
(the Redis server, the controller actor, the gateway, the Serve app, the pool, the learner), the
settings it runs with now, how to replace it so that training never stops, skips or repeats an
optimizer step (``services.operations.restarts`` states the rule for each), and how to report it.
``services.operations.run_services.Services`` lists a run's; ``services.operations.stack.start_stack``
starts them together (each once what it needs is up) and stops them together at the run's end.
The step pipeline sees only their handles, which stay valid across a replacement (``Stack``).
"""

from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass
from typing import Generic, TypeVar

from services.contracts.operations import ServiceStatus
from services.errors import ConflictError, InputError
from services.operations.run_pieces import RunPieces
from services.run_dir import RunDir
from services.settings.per_service import ServiceSettings

S = TypeVar("S", bound=ServiceSettings)
T = TypeVar("T")


class RunBrokenError(RuntimeError):
    """A restart left the run unable to go on correctly: it stops (resume from its checkpoint)."""


@dataclass(frozen=True)
class RunContext:
    """What every service of a run knows: each service's piece of the run's settings (a resumed
    run's: those its config.json saved), the run's directory and id."""

    pieces: RunPieces
    run: RunDir
    run_id: str


@dataclass(frozen=True)
class Change:
    """What a restart brings: the pieces of a new config file (None: none given)."""

    run: RunPieces | None = None


class ManagedService(ABC, Generic[S]):
    """One service of the run, holding its own settings object (``S``: what it runs with now) and,
    once started, its live process. ``kind`` names it in `turnopd restart`; ``counts`` is the run's
    restart count per service name."""

    kind: str

    def __init__(self, ctx: RunContext, counts: Counter[str]) -> None:
        self.ctx = ctx
        self.counts = counts
        self.settings: S = self.compose(ctx.pieces)

    @abstractmethod
    def compose(self, run: RunPieces) -> S:
        """Its settings object: its piece of a run's."""

    @abstractmethod
    def start(self) -> None:
        """Bring it up with its settings."""

    @abstractmethod
    def stop(self) -> None:
        """Stop what it runs now (nothing if it never started, or is not this run's)."""

    def restarted(self, change: Change, current: S | None = None) -> S | None:
        """``current`` (default: what it runs with now) with what a restart may change taken from the
        change's config; None: no config given. A config for a service that takes nothing from one
        is an error, not silently ignored."""
        if change.run is None:
            return None
        current = current if current is not None else self.settings
        if not current.RESTARTABLE:
            raise InputError(
                f"{self.kind} takes nothing from a new config: every setting it has defines the run; "
                "restart it without --config"
            )
        return current.restarted(self.compose(change.run))

    def version(self) -> str:
        """Fingerprint of the settings it runs with now."""
        return self.settings.fingerprint()

    @abstractmethod
    def replace(self, change: Change, step: int) -> str:
        """A fresh process in its place (with the change's settings if any), training going on, ``step``
        steps done; what happened, in one line. A failure with new settings brings it back as it
        was, then raises."""

    def scale(self, size: int) -> str:
        raise ConflictError(
            f"{self.kind} has no replicas to scale; `turnopd scale` takes rollout-pool or teacher"
        )

    @abstractmethod
    def status(self, step: int) -> list[ServiceStatus]:
        """Its rows of `turnopd status` (the driver's view; the CLI adds its own pings)."""


def started(live: T | None, what: str) -> T:
    """``live``, else the error that the service has not started (or was never this run's)."""
    if live is None:
        raise ConflictError(f"the {what} has not started")
    return live
