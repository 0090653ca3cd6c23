"""The gateway's episode service: creates episodes on workers, validates actions, counts turns,
expires idle episodes. Async, but free of HTTP: routes call it and translate its errors."""

import asyncio
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from services.contracts.env_gateway import (
    EnvCatalog,
    EnvName,
    EpisodeCreate,
    EpisodeStart,
    Health,
    Split,
    StepResult,
)
from services.contracts.env_worker import (
    CloseEpisode,
    OpenDone,
    OpenEpisode,
    StepDone,
    StepEpisode,
    WorkerError,
)
from services.env_gateway.action_validation import check_action
from services.env_gateway.backend_factory import ENV_NAMES, make_backend
from services.env_gateway.episode_errors import EngineError, EpisodeLostError, GatewayBusyError
from services.env_gateway.metrics import GatewayMetrics
from services.env_gateway.worker_pool import WorkerPool
from services.env_gateway.worker_process import Reply
from services.envs.backend import EnvBackend
from services.errors import ConfigError, ConflictError, InputError, NotFoundError, TurnOPDError
from services.settings.env_gateway import EnvGatewaySettings

T = TypeVar("T")

_ERRORS: dict[str, type[TurnOPDError]] = {
    "InputError": InputError,
    "NotFoundError": NotFoundError,
    "ConflictError": ConflictError,
    "ConfigError": ConfigError,
    "TurnOPDError": EngineError,
}


@dataclass
class EpisodeRecord:
    id: str
    env: EnvName
    split: Split
    task_type: str
    slot: int
    generation: int
    admissible: list[str]
    last_used: float
    turn: int = 0
    done: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class EpisodeService:
    def __init__(
        self,
        settings: EnvGatewaySettings,
        pool: WorkerPool,
        metrics: GatewayMetrics,
        *,
        service_token: str | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._pool = pool
        self._metrics = metrics
        self._clock = clock
        self._backends: dict[EnvName, EnvBackend] = {
            name: make_backend(name, settings, service_token=service_token) for name in ENV_NAMES
        }
        self._episodes: dict[str, EpisodeRecord] = {}
        self._seeds = random.SystemRandom()

    def catalog(self) -> EnvCatalog:
        return EnvCatalog(envs=[backend.info() for backend in self._backends.values()])

    def health(self) -> Health:
        alive, size = self._pool.alive(), self._pool.size()
        self._metrics.workers_alive.set(alive)
        return Health(
            status="ok" if alive == size else "degraded",
            workers=alive,
            workers_expected=size,
            active_episodes=len(self._episodes),
            worker_restarts=self._pool.restarts,
            worker_pids=self._pool.pids(),
        )

    async def create(self, request: EpisodeCreate) -> EpisodeStart:
        backend = self._backends[request.env]
        if request.task_type is not None and request.task_type not in backend.task_types():
            known = backend.task_types()
            raise InputError(f"unknown task_type {request.task_type!r} for env {request.env}; known: {known}")
        seed = request.seed if request.seed is not None else self._seeds.randrange(2**31)
        episode_id = uuid.uuid4().hex
        slot, generation = self._pool.reserve(episode_id)
        open_request = OpenEpisode(
            episode_id=episode_id,
            env=request.env,
            split=request.split,
            seed=seed,
            task_type=request.task_type,
            expert=request.expert,
        )
        try:
            reply = _expect(await self._pool.call(slot, generation, open_request), OpenDone)
        except EpisodeLostError as exc:
            self._pool.release(slot, generation, episode_id)
            raise GatewayBusyError(f"the env worker died while opening the game; retry ({exc})") from None
        except BaseException:
            self._pool.release(slot, generation, episode_id)
            raise
        self._episodes[episode_id] = EpisodeRecord(
            episode_id,
            request.env,
            request.split,
            reply.task_type,
            slot,
            generation,
            reply.admissible_actions,
            self._clock(),
        )
        self._metrics.episodes_created.labels(request.env, request.split).inc()
        self._metrics.episodes_active.set(len(self._episodes))
        return EpisodeStart(
            episode_id=episode_id,
            observation=reply.observation,
            objective=reply.objective,
            admissible_actions=reply.admissible_actions,
            turn=0,
            task_type=reply.task_type,
            game_id=reply.game_id,
            seed=seed,
            expert_action=reply.expert_action,
        )

    async def step(self, episode_id: str, action: str) -> StepResult:
        record = self._record(episode_id)
        async with record.lock:
            record.last_used = self._clock()
            if not self._pool.is_current(record.slot, record.generation):
                raise EpisodeLostError(f"episode {episode_id} is gone: its env worker process died")
            if record.done:
                raise ConflictError(
                    f"episode {episode_id} is finished (after turn {record.turn}); start a new one"
                )
            try:
                command = check_action(action, record.admissible)
            except InputError:
                self._metrics.rejected_actions.labels(record.env).inc()
                raise
            started = time.perf_counter()
            reply = await self._call(record, StepEpisode(episode_id=episode_id, action=command))
            step = _expect(reply, StepDone)
            self._metrics.step_latency.labels(record.env).observe(time.perf_counter() - started)
            self._metrics.steps.labels(record.env).inc()
            record.turn += 1
            record.admissible = step.admissible_actions
            record.done = step.done
            if step.done:
                self._metrics.episodes_finished.labels(record.env, str(step.won).lower()).inc()
            return StepResult(
                observation=step.observation,
                reward=step.reward,
                done=step.done,
                won=step.won,
                admissible_actions=step.admissible_actions,
                turn=record.turn,
                expert_action=step.expert_action,
            )

    async def delete(self, episode_id: str) -> None:
        record = self._record(episode_id)
        await self._close(record)

    async def expire_idle(self) -> int:
        """Close episodes idle for longer than the TTL; returns how many."""
        deadline = self._clock() - self._settings.episode_ttl_s
        stale = [r for r in self._episodes.values() if r.last_used < deadline and not r.lock.locked()]
        for record in stale:
            await self._close(record)
            self._metrics.episodes_expired.inc()
        return len(stale)

    async def close_all(self) -> None:
        for record in list(self._episodes.values()):
            await self._close(record)

    def _record(self, episode_id: str) -> EpisodeRecord:
        try:
            return self._episodes[episode_id]
        except KeyError:
            raise NotFoundError(f"no episode {episode_id!r} (never created, deleted, or expired)") from None

    async def _close(self, record: EpisodeRecord) -> None:
        if self._episodes.pop(record.id, None) is None:
            return
        self._metrics.episodes_active.set(len(self._episodes))
        self._pool.release(record.slot, record.generation, record.id)
        if self._pool.is_current(record.slot, record.generation):
            # Closing on a worker that dies meanwhile is fine: the game is gone either way.
            try:
                await self._pool.call(record.slot, record.generation, CloseEpisode(episode_id=record.id))
            except EpisodeLostError:
                self._metrics.episodes_lost.inc()

    async def _call(self, record: EpisodeRecord, request: StepEpisode) -> Reply:
        try:
            reply = await self._pool.call(record.slot, record.generation, request)
        except EpisodeLostError:
            self._metrics.episodes_lost.inc()
            raise
        if isinstance(reply, WorkerError) and reply.error == "TurnOPDError":
            # The worker dropped the broken session: so does the gateway.
            self._episodes.pop(record.id, None)
            self._pool.release(record.slot, record.generation, record.id)
            self._metrics.episodes_active.set(len(self._episodes))
        return reply


def _expect(reply: Reply, kind: type[T]) -> T:
    """The reply if it has the expected kind; a worker-side error is raised as its TurnOPD class."""
    if isinstance(reply, kind):
        return reply
    if isinstance(reply, WorkerError):
        raise _ERRORS[reply.error](reply.message)
    raise EngineError(f"env worker answered {type(reply).__name__}, expected {kind.__name__}")
