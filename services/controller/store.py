"""Where the controller keeps its state: a small ABC and its Redis implementation.

Keys live under ``turnopd:{run_id}:`` (a multi-environment run: ``turnopd:{run_id}:controller:{env}:``,
one controller per environment): ``state`` (the ControllerState JSON), ``decisions`` (list of
StepDecision JSON, one per completed step) and ``probes`` (hash step -> ProbeStats JSON). A step is
written in one MULTI/EXEC transaction guarded by WATCH on ``state``: it lands whole or not at all,
and a stale writer (e.g. a zombie controller) whose view of the last step is outdated is refused.

Redis may restart under a live run (`turnopd restart redis`; the embedded server keeps an
append-only file): commands reconnect with backoff, and a transaction cut by a lost connection is
run again; if its EXEC had landed before the connection broke, the stored state already equals
the new one and the retry writes nothing (a step is never recorded twice). Another writer of the
same step is still refused.

A Redis that came back without its last writes (``appendfsync everysec``) holds an older state than
the writer's: ``save`` refuses it with ``StoreBehindError``, and the controller puts back what was
lost (``restore``; ``services.controller.recovery`` rebuilds it from the run's own records).
"""

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Literal

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from services.contracts.controller import ProbeStats, StepDecision
from services.contracts.controller_state import ControllerState
from services.errors import ConflictError

StoreKind = Literal["redis"]
_SAVE_ATTEMPTS = 8
_SAVE_BACKOFF_S = 0.25


class StoreBehindError(ConflictError):
    """The store holds an older state than the one a step follows: it lost its last writes."""


class StateStore(ABC):
    @abstractmethod
    def load(self) -> ControllerState | None:
        """The last saved state, or None for a new run."""

    @abstractmethod
    def save(self, state: ControllerState, decision: StepDecision | None, stats: ProbeStats | None) -> None:
        """Persist a state (and the step that produced it) atomically."""

    @abstractmethod
    def rewind(self, state: ControllerState) -> None:
        """Make ``state`` current and forget every decision and probe after its step."""

    @abstractmethod
    def restore(
        self, state: ControllerState, decisions: Sequence[StepDecision], seen: ControllerState | None
    ) -> None:
        """Put back what the store lost: ``state`` and the ``decisions`` of steps 1..its step, in one
        write; ConflictError if the stored state is no longer ``seen`` (another writer came first)."""

    @abstractmethod
    def decisions(self) -> list[StepDecision]:
        """Every completed step's decision, in order."""

    @abstractmethod
    def probes(self) -> dict[int, ProbeStats]:
        """Every ingested probe batch by step."""

    @abstractmethod
    def ping(self) -> None:
        """Raise if the store does not answer."""


def key_prefix(run_id: str, env: str | None = None) -> str:
    """Where a run's controller keeps its keys; ``env``: one of a multi-environment run's controllers."""
    return f"turnopd:{run_id}:" if env is None else f"turnopd:{run_id}:controller:{env}:"


class RedisStateStore(StateStore):
    def __init__(self, url: str, run_id: str, env: str | None = None) -> None:
        self._redis = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=10,
            retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 10),
            retry_on_error=[redis.exceptions.ConnectionError, redis.exceptions.TimeoutError],
        )
        self._prefix = key_prefix(run_id, env)

    def _key(self, name: str) -> str:
        return self._prefix + name

    def load(self) -> ControllerState | None:
        raw = self._redis.get(self._key("state"))
        return None if raw is None else ControllerState.model_validate_json(raw)

    def save(self, state: ControllerState, decision: StepDecision | None, stats: ProbeStats | None) -> None:
        for attempt in range(1, _SAVE_ATTEMPTS + 1):
            try:
                self._save_once(state, decision, stats, retry=attempt > 1)
                return
            except (redis.exceptions.WatchError, redis.exceptions.ConnectionError) as exc:
                # WatchError also stands for "the connection broke while watching" (a Redis restart).
                if attempt == _SAVE_ATTEMPTS:
                    raise ConflictError(
                        f"could not write controller step {state.depth.step} in {attempt} attempts "
                        f"(another controller writing, or Redis down): {exc}"
                    ) from None
                time.sleep(_SAVE_BACKOFF_S * attempt)

    def _save_once(
        self, state: ControllerState, decision: StepDecision | None, stats: ProbeStats | None, retry: bool
    ) -> None:
        state_key = self._key("state")
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.watch(state_key)
            raw = pipe.get(state_key)
            stored = None if raw is None else ControllerState.model_validate_json(raw)
            if retry and stored == state:
                return  # this call's earlier attempt landed before its reply was lost
            expected = state.depth.step - (1 if decision is not None else 0)
            held = stored.depth.step if stored is not None else 0
            if held < expected:
                raise StoreBehindError(
                    f"stored controller state is at step {held}, behind step {expected} that step "
                    f"{state.depth.step} follows: Redis lost its last writes"
                )
            if held != expected:
                raise ConflictError(
                    f"stored controller state is at step {held}, cannot write step {state.depth.step}"
                )
            pipe.multi()
            pipe.set(state_key, state.model_dump_json())
            if decision is not None:
                pipe.rpush(self._key("decisions"), decision.model_dump_json())
            if stats is not None:
                pipe.hset(self._key("probes"), str(stats.step), stats.model_dump_json())
            pipe.execute()

    def rewind(self, state: ControllerState) -> None:
        keep = state.depth.step
        probes = self._redis.hkeys(self._key("probes"))
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(self._key("state"), state.model_dump_json())
            if keep == 0:
                pipe.delete(self._key("decisions"))
            else:
                pipe.ltrim(self._key("decisions"), 0, keep - 1)
            for step in probes:
                if int(step) > keep:
                    pipe.hdel(self._key("probes"), step)
            pipe.execute()

    def restore(
        self, state: ControllerState, decisions: Sequence[StepDecision], seen: ControllerState | None
    ) -> None:
        state_key, decisions_key = self._key("state"), self._key("decisions")
        try:
            with self._redis.pipeline(transaction=True) as pipe:
                pipe.watch(state_key)
                raw = pipe.get(state_key)
                if (None if raw is None else ControllerState.model_validate_json(raw)) != seen:
                    raise ConflictError("the stored controller state changed while it was being rebuilt")
                pipe.multi()
                pipe.set(state_key, state.model_dump_json())
                pipe.delete(decisions_key)
                if decisions:
                    pipe.rpush(decisions_key, *(d.model_dump_json() for d in decisions))
                pipe.execute()
        except redis.exceptions.WatchError:
            raise ConflictError("the stored controller state changed while it was being rebuilt") from None

    def decisions(self) -> list[StepDecision]:
        return [
            StepDecision.model_validate_json(r) for r in self._redis.lrange(self._key("decisions"), 0, -1)
        ]

    def probes(self) -> dict[int, ProbeStats]:
        raw = self._redis.hgetall(self._key("probes"))
        return {int(k): ProbeStats.model_validate_json(v) for k, v in raw.items()}

    def ping(self) -> None:
        self._redis.ping()


def open_store(kind: StoreKind, url: str, run_id: str, env: str | None = None) -> StateStore:
    match kind:
        case "redis":
            return RedisStateStore(url, run_id, env)
        case _:
            raise ValueError(f"unknown state store {kind!r}")
