"""Where the controller keeps its state: a small ABC and its Redis implementation.

Keys live under ``turnopd:{run_id}:``: ``state`` (the ControllerState JSON), ``decisions`` (list of
StepDecision JSON, one per completed step) and ``probes`` (hash step -> ProbeStats JSON). A step is
written in one MULTI/EXEC transaction guarded by WATCH on ``state``: it lands whole or not at all,
and a stale writer (e.g. a zombie controller) whose view of the last step is outdated is refused.
"""

from abc import ABC, abstractmethod
from typing import Literal

import redis

from services.contracts.controller import ProbeStats, StepDecision
from services.contracts.controller_state import ControllerState
from services.errors import ConflictError

StoreKind = Literal["redis"]


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
    def decisions(self) -> list[StepDecision]:
        """Every completed step's decision, in order."""

    @abstractmethod
    def probes(self) -> dict[int, ProbeStats]:
        """Every ingested probe batch by step."""


def key_prefix(run_id: str) -> str:
    return f"turnopd:{run_id}:"


class RedisStateStore(StateStore):
    def __init__(self, url: str, run_id: str) -> None:
        self._redis = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10)
        self._prefix = key_prefix(run_id)

    def _key(self, name: str) -> str:
        return self._prefix + name

    def load(self) -> ControllerState | None:
        raw = self._redis.get(self._key("state"))
        return None if raw is None else ControllerState.model_validate_json(raw)

    def save(self, state: ControllerState, decision: StepDecision | None, stats: ProbeStats | None) -> None:
        state_key = self._key("state")
        with self._redis.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(state_key)
                raw = pipe.get(state_key)
                stored = None if raw is None else ControllerState.model_validate_json(raw)
                expected = state.depth.step - (1 if decision is not None else 0)
                if stored is not None and stored.depth.step != expected:
                    raise ConflictError(
                        f"stored controller state is at step {stored.depth.step}, cannot write step {state.depth.step}"
                    )
                pipe.multi()
                pipe.set(state_key, state.model_dump_json())
                if decision is not None:
                    pipe.rpush(self._key("decisions"), decision.model_dump_json())
                if stats is not None:
                    pipe.hset(self._key("probes"), str(stats.step), stats.model_dump_json())
                pipe.execute()
            except redis.exceptions.WatchError:
                raise ConflictError(
                    "controller state changed concurrently; another controller is writing"
                ) from None

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

    def decisions(self) -> list[StepDecision]:
        return [
            StepDecision.model_validate_json(r) for r in self._redis.lrange(self._key("decisions"), 0, -1)
        ]

    def probes(self) -> dict[int, ProbeStats]:
        raw = self._redis.hgetall(self._key("probes"))
        return {int(k): ProbeStats.model_validate_json(v) for k, v in raw.items()}


def open_store(kind: StoreKind, url: str, run_id: str) -> StateStore:
    match kind:
        case "redis":
            return RedisStateStore(url, run_id)
        case _:
            raise ValueError(f"unknown state store {kind!r}")
