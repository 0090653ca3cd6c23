"""The driver's side of the rollout pool: named worker actors, work dispatch, weights, recovery.

``play`` cuts the tasks into chunks (one per worker by default: an even split) and hands each
idle worker the next chunk, so a slow or restarted worker does not hold the others back. When a
worker dies mid-play (``RayActorError``), Ray restarts it; the pool waits for it, reloads the
current weights into it, and plays that chunk again (``rollout_worker.max_attempts`` times in
all), and only then reports the chunk's tasks as ``EpisodeFailure``. Re-plays sample the same
way (chunk seeds depend on the tasks, not on the worker), and every result names the weights
version that generated it, which is always the version the caller asked for.

A chunk whose result lost episodes to the env gateway (``EpisodeFailure.reason`` ``env_lost``: the
gateway's env worker process died under them and was replaced) is played again whole, with the same
seeds, so the step gets the trajectories an undisturbed play gives; after ``max_attempts`` plays its
tasks are failures with that reason. One that could not reach the gateway at all (``env_unreachable``:
its process died) is played again once a new gateway is switched in (waiting ``GATEWAY_BACK_S`` at
most, once for all the chunks that found that gateway silent). A failure of the environment itself
(a game that raises on an action) is no loss: it stays in the result as the failure it is.

Operations (`turnopd restart`) act from another thread while ``play`` runs: ``replace_worker``
swaps a worker for a fresh actor (its chunk in flight dies with it and is played again by the
new one), and ``switch_env_gateway`` points every later request at a new gateway; a chunk that
was in flight across the switch and lost episodes is played again whole, with the same seeds.
"""

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from services.cluster_capacity import check_free_resources
from services.contracts.rollout import (
    EpisodeFailure,
    EpisodeTask,
    FailureReason,
    RolloutRequest,
    RolloutResult,
)
from services.errors import ConflictError, InputError, TurnOPDError
from services.ray_names import NAMESPACE
from services.ray_names import ROLLOUT_POOL as POOL_NAME
from services.ray_session import free_name, wait_name_free
from services.rollout_worker.actor import RolloutWorker, worker_name, worker_options, worker_resources
from services.rollout_worker.engines.base import next_version
from services.rollout_worker.seeds import derive_seed
from services.rollout_worker.task_chunks import depth_chunks, lost_episodes, merge_results
from services.rollout_worker.weights_version import StaleWeightsError
from services.settings.per_service import RolloutWorkerServiceSettings

log = logging.getLogger(__name__)

_DEAD_POLL_S = 0.5
# how long a chunk that could not reach the env gateway waits for a new one before its next play
GATEWAY_BACK_S = 60.0
_DEAD_POLLS = 20  # consecutive "actor died" answers before a worker counts as gone for good


@dataclass
class PoolStats:
    """What went wrong so far and how the pool coped."""

    worker_deaths: int = 0
    replays: int = 0  # chunks played again after a death or a stale worker
    weight_reloads: int = 0  # restarted workers brought back to the published version
    failed_chunks: int = 0
    overdue_kills: int = 0  # workers killed for playing one chunk past rollout_worker.chunk_timeout_s
    env_replays: int = 0  # chunks played again because the env gateway was replaced under them
    env_lost_replays: int = 0  # chunks played again because the gateway lost episodes (env_lost)
    crashes_by_worker: Counter[int] = field(default_factory=Counter)  # deaths seen, or found restarted
    replacements_by_worker: Counter[int] = field(default_factory=Counter)


class RolloutPool:
    """``workers`` actors ``rollout-worker-{i}`` (namespace ``turnopd``) playing ``model``.

    ``own``: what each worker is given, and what the pool itself reads of it (``[rollout_worker]``
    ``max_attempts``, ``chunk_timeout_s``, ``restart_timeout_s``): the settings of the pool's last
    start, resize or ``retune`` (a `rollout-pool` restart with a new config), never the run's tree.
    """

    def __init__(
        self, own: RolloutWorkerServiceSettings, workers: int, env_gateway_url: str, model: str
    ) -> None:
        self.own = own
        self.model = model
        self.stats = PoolStats()
        self._version = 0
        self._weights_ref: Any = None
        self._lost: set[int] = set()
        self._env_url = env_gateway_url
        self._env_generation = 0
        self._changes = threading.Condition()  # guards _workers swaps, _replacing and the env URL
        self._replacing: set[int] = set()
        self._busy: set[int] = set()  # workers playing a chunk now
        self._retiring: set[int] = set()  # workers a shrink takes no more chunks from
        self._membership = threading.Lock()  # a resize, or a publish (which must see every worker)
        self._worker_settings = [own] * workers  # each worker's (a restart may change one)
        actor: Any = RolloutWorker
        self._workers = [
            actor.options(**worker_options(own, i)).remote(own, i, env_gateway_url, model)
            for i in range(workers)
        ]
        timeout = own.ready_timeout_s
        try:
            self._incarnations = ray.get([w.ready.remote() for w in self._workers], timeout=timeout)
        except GetTimeoutError:
            self.close()
            raise TurnOPDError(
                f"{workers} rollout workers were not ready within {timeout:.0f}s "
                f"(rollout_worker.ready_timeout_s): their {own.models.engine} engine of "
                f"{own.models.student!r} was still starting; raise the timeout if the engine is slow to "
                f"start here (vLLM's CPU build), else check that the Ray cluster has "
                f"{own.rollout_worker.num_cpus:g} free CPUs (and the GPUs) for each"
            ) from None

    @property
    def weights_version(self) -> int:
        return self._version

    @property
    def env_gateway_url(self) -> str:
        return self._env_url

    @property
    def size(self) -> int:
        return len(self._workers)

    def worker_settings(self, index: int) -> RolloutWorkerServiceSettings:
        """The settings worker ``index`` was (re)started with."""
        self._check_index(index)
        return self._worker_settings[index]

    def _check_index(self, index: int) -> None:
        if not 0 <= index < len(self._workers):
            raise InputError(f"no {worker_name(index)}: the pool has workers 0..{len(self._workers) - 1}")

    def members(self) -> list[tuple[int, RolloutWorkerServiceSettings, bool]]:
        """(index, settings, live) of every worker, read at one moment (a resize may run meanwhile)."""
        with self._changes:
            return [(i, s, i not in self._lost) for i, s in enumerate(self._worker_settings)]

    @property
    def live_workers(self) -> list[str]:
        return [worker_name(i) for i in range(len(self._workers)) if i not in self._lost]

    def play(
        self,
        tasks: Sequence[EpisodeTask],
        h_roll: int | Sequence[int],
        temperature: float,
        weights_version: int,
        max_new_tokens: int | None = None,
        *,
        seed: int | None = None,
        chunk_size: int | None = None,
        on_result: Callable[[RolloutResult], None] | None = None,
    ) -> RolloutResult:
        """Play every task with weights ``weights_version``; trajectories come back in task order.
        ``h_roll``: the turn cap of every task, or of each (a multi-environment step's sources, each
        with its own depth, played in one dispatch).

        ``chunk_size`` caps the tasks of one worker call (default: an even split, one call per
        worker); ``on_result`` sees each call's result as it arrives (progress bars).
        """
        if weights_version != self._version:
            raise StaleWeightsError(POOL_NAME, self._version, weights_version)
        depths = [h_roll] * len(tasks) if isinstance(h_roll, int) else list(h_roll)
        if len(depths) != len(tasks):
            raise InputError(f"{len(depths)} rollout depths for {len(tasks)} tasks")
        started = time.perf_counter()
        pieces = depth_chunks(depths, len(self._workers), chunk_size)
        chunks = [chunk for chunk, _ in pieces]
        requests = [
            RolloutRequest(
                tasks=[tasks[i] for i in chunk],
                h_roll=depth,
                temperature=temperature,
                weights_version=weights_version,
                max_new_tokens=max_new_tokens,
                seed=None if seed is None else derive_seed("chunk", seed, chunk.start),
            )
            for chunk, depth in pieces
        ]
        results, failed = self._dispatch(requests, on_result)
        return merge_results(tasks, chunks, results, failed, self._version, time.perf_counter() - started)

    def _dispatch(
        self, requests: Sequence[RolloutRequest], on_result: Callable[[RolloutResult], None] | None
    ) -> tuple[dict[int, RolloutResult], dict[int, list[EpisodeFailure]]]:
        pending = deque(range(len(requests)))
        attempts = [0] * len(requests)
        results: dict[int, RolloutResult] = {}
        failed: dict[int, list[EpisodeFailure]] = {}
        with self._changes:
            known = len(self._workers)
            idle = deque(i for i in range(known) if i not in self._lost and i not in self._retiring)
        inflight: dict[Any, tuple[int, int, int, Any]] = {}  # ref -> (worker, chunk, env generation, handle)
        due: dict[Any, float] = {}  # ref -> when its chunk is overdue (rollout_worker.chunk_timeout_s)
        silent: dict[int, float] = {}  # env generation -> until when chunks wait for the next gateway
        chunk_timeout_s = self.own.rollout_worker.chunk_timeout_s
        while pending or inflight:
            with self._changes:  # workers a resize added since: they play from now on
                idle.extend(range(known, len(self._workers)))
                known = len(self._workers)
            while pending and idle:
                worker = idle.popleft()
                with self._changes:
                    if worker in self._retiring or worker >= len(self._workers):
                        continue  # a shrink takes it away
                    handle, url, generation = self._workers[worker], self._env_url, self._env_generation
                    self._busy.add(worker)
                chunk = pending.popleft()
                attempts[chunk] += 1
                request = requests[chunk].model_copy(update={"env_gateway_url": url})
                ref = handle.play.remote(request)
                inflight[ref] = (worker, chunk, generation, handle)
                if chunk_timeout_s is not None:
                    due[ref] = time.monotonic() + chunk_timeout_s
            if not inflight:  # every worker is gone
                for chunk in pending:
                    failed[chunk] = self._fail(
                        requests[chunk], POOL_NAME, "no rollout worker is left", "worker_lost"
                    )
                break
            ready = self._wait_one(inflight, due, chunk_timeout_s)
            if ready is None:
                continue  # an overdue worker was killed: its chunk comes back as a RayActorError
            ref = ready
            due.pop(ref, None)
            worker, chunk, generation, handle = inflight.pop(ref)
            try:
                result: RolloutResult = ray.get(ref)
            except (RayActorError, StaleWeightsError) as exc:
                self._done_with(worker)
                if not self._replaced(worker, handle):
                    # a stale worker is one Ray restarted while it was idle (it came back at version 0)
                    self.stats.crashes_by_worker[worker] += 1
                    if isinstance(exc, RayActorError):
                        self.stats.worker_deaths += 1
                        log.warning("%s died playing chunk %d: %s", worker_name(worker), chunk, exc)
                if not self._leaving(worker) and self._recover(worker):
                    idle.append(worker)
                self._again(chunk, attempts, pending, failed, requests, worker, f"{exc}", "worker_lost")
                continue
            self._done_with(worker)
            idle.append(worker)
            lost = lost_episodes(result, gateway_switched=generation != self._env_generation)
            if lost:
                self._count_lost(chunk, lost, generation != self._env_generation)
                unreachable = any(f.reason == "env_unreachable" for f in lost)
                if unreachable and attempts[chunk] < self.own.rollout_worker.max_attempts:
                    back_by = silent.setdefault(generation, time.monotonic() + GATEWAY_BACK_S)
                    self._await_gateway(generation, back_by)
                reason: FailureReason = "env_unreachable" if unreachable else "env_lost"
                self._again(chunk, attempts, pending, failed, requests, worker, lost[0].error, reason)
                continue
            results[chunk] = result
            if on_result is not None:
                on_result(result)
        return results, failed

    def _await_gateway(self, generation: int, back_by: float) -> None:
        """Wait (until ``back_by``: ``GATEWAY_BACK_S`` after the first chunk found the gateway of
        ``generation`` silent, once for all of them) for a new env gateway: the watchdog replaces one
        this run started and switches the pool to it; one run elsewhere (a Kubernetes Service) comes
        back at the same address, which the next play tries."""
        with self._changes:
            back = self._changes.wait_for(
                lambda: self._env_generation != generation, max(0.0, back_by - time.monotonic())
            )
        if back:
            log.info("the env gateway is back at %s: playing the chunk again", self._env_url)
        else:
            log.warning(
                "no new env gateway in %.0f s: playing against %s again", GATEWAY_BACK_S, self._env_url
            )

    def _count_lost(self, chunk: int, lost: Sequence[EpisodeFailure], gateway_switched: bool) -> None:
        if gateway_switched:
            self.stats.env_replays += 1
            log.warning("chunk %d lost episodes to an env gateway switch; playing it again", chunk)
        else:
            self.stats.env_lost_replays += 1
            log.warning(
                "chunk %d lost %d episode(s) to the env gateway (%s); playing it again",
                chunk,
                len(lost),
                lost[0].error,
            )

    def _wait_one(
        self, inflight: dict[Any, tuple[int, int, int, Any]], due: dict[Any, float], timeout_s: float | None
    ) -> Any:
        """The next chunk to finish, or None once a chunk in flight passed its deadline: its worker,
        alive but hung (an env call or the engine that never returns), is killed, so Ray restarts it
        and the chunk comes back as a ``RayActorError``, played again like a death."""
        wait_s = None if not due else max(0.0, min(due.values()) - time.monotonic())
        done, _ = ray.wait(list(inflight), num_returns=1, timeout=wait_s)
        if done:
            return done[0]
        now = time.monotonic()
        for ref in [r for r, when in due.items() if when <= now]:
            worker, chunk, _, handle = inflight[ref]
            del due[ref]  # killed once; its error arrives through the ref
            self.stats.overdue_kills += 1
            log.warning(
                "%s played chunk %d for more than %.0fs (rollout_worker.chunk_timeout_s): killed, "
                "so Ray restarts it; the chunk is played again",
                worker_name(worker),
                chunk,
                timeout_s,
            )
            ray.kill(handle, no_restart=False)
        return None

    def _leaving(self, worker: int) -> bool:
        """A shrink is taking ``worker`` away (or has)."""
        with self._changes:
            return worker in self._retiring or worker >= len(self._workers)

    def _done_with(self, worker: int) -> None:
        """``worker``'s chunk is over (played or failed); a shrink waiting to drain it may go on."""
        with self._changes:
            self._busy.discard(worker)
            self._changes.notify_all()

    def _again(
        self,
        chunk: int,
        attempts: list[int],
        pending: deque[int],
        failed: dict[int, list[EpisodeFailure]],
        requests: Sequence[RolloutRequest],
        worker: int,
        error: str,
        reason: FailureReason = "play",
    ) -> None:
        """Queue ``chunk`` for another play, or report its tasks failed (with ``reason``) after
        ``max_attempts``."""
        if attempts[chunk] < self.own.rollout_worker.max_attempts:
            self.stats.replays += 1
            pending.appendleft(chunk)
        else:
            self.stats.failed_chunks += 1
            why = f"played {attempts[chunk]} times without a result; last error: {error}"
            failed[chunk] = self._fail(requests[chunk], worker_name(worker), why, reason)

    @staticmethod
    def _fail(
        request: RolloutRequest, worker: str, why: str, reason: FailureReason = "play"
    ) -> list[EpisodeFailure]:
        error = " ".join(why.split())[:2000]
        return [EpisodeFailure(task=t, error=error, worker=worker, reason=reason) for t in request.tasks]

    def _recover(self, index: int) -> bool:
        """Wait for Ray to restart (or an operator to replace) worker ``index`` and give it the
        published weights; False if it is gone."""
        deadline = time.monotonic() + self.own.restart_timeout_s
        died_answers = 0
        while time.monotonic() < deadline:
            worker = self._current_worker(index, deadline)
            if worker is None:
                return False  # a shrink took it away meanwhile: nothing to recover
            try:
                incarnation = ray.get(worker.ready.remote(), timeout=max(0.1, deadline - time.monotonic()))
                with self._changes:
                    if index < len(self._workers) and self._workers[index] is worker:
                        self._incarnations[index] = incarnation  # the death that brought us here is counted
                held = ray.get(worker.weights_version.remote())
                if held != self._version:
                    ray.get(worker.load_weights.remote(self._weights_ref, self._version, True))
                    self.stats.weight_reloads += 1
                    log.info("%s reloaded weights version %d", worker_name(index), self._version)
                return True
            except RayActorError:
                died_answers += 1
                if died_answers >= _DEAD_POLLS:
                    break
                time.sleep(_DEAD_POLL_S)
            except GetTimeoutError:
                break
        log.error("%s did not come back; the pool goes on without it", worker_name(index))
        with self._changes:
            if index < len(self._workers):
                self._lost.add(index)
        return False

    def _replaced(self, index: int, handle: Any) -> bool:
        """Whether ``handle`` died because an operator replaced or retired worker ``index`` (not a crash)."""
        with self._changes:
            return (
                index in self._replacing
                or index in self._retiring
                or index >= len(self._workers)
                or self._workers[index] is not handle
            )

    def _current_worker(self, index: int, deadline: float) -> Any | None:
        """Worker ``index``'s handle, once any replacement of it in progress has finished; None once a
        shrink has taken it out of the pool."""
        with self._changes:
            self._changes.wait_for(lambda: index not in self._replacing, timeout=deadline - time.monotonic())
            return self._workers[index] if index < len(self._workers) else None

    def retune(self, settings: RolloutWorkerServiceSettings) -> None:
        """Read the pool's own knobs from ``settings`` from now on (every worker was replaced with them)."""
        self.own = settings

    def replace_worker(self, index: int, settings: RolloutWorkerServiceSettings | None = None) -> None:
        """Replace worker ``index`` by a fresh actor (new ``settings`` if given) at the published weights.

        Safe while ``play`` runs in another thread: the old actor's chunk fails, and the pool's
        recovery waits for the new actor, then plays the chunk again.
        """
        with self._changes:  # a shrink waits for this replacement before it takes the worker away
            self._check_index(index)
            if index in self._retiring:
                raise ConflictError(f"{worker_name(index)} is leaving the pool (a shrink is under way)")
            if index in self._replacing:
                raise InputError(f"{worker_name(index)} is already being replaced")
            self._replacing.add(index)
            settings = settings or self._worker_settings[index]
            old = self._workers[index]
        try:
            ray.kill(old, no_restart=True)
            free_name(worker_name(index), f"the killed {worker_name(index)}")
            fresh = RolloutWorker.options(**worker_options(settings, index)).remote(  # type: ignore[attr-defined]
                settings, index, self._env_url, self.model
            )
            try:
                self._install(index, fresh, settings)
            except BaseException:
                # never left half-started (pending on resources, or without weights): it would keep
                # the name, and a retry with the old settings could not take it
                ray.kill(fresh, no_restart=True)
                wait_name_free(worker_name(index), NAMESPACE, 60.0)
                raise
        finally:
            with self._changes:
                self._replacing.discard(index)
                self._changes.notify_all()

    def _install(self, index: int, fresh: Any, settings: RolloutWorkerServiceSettings) -> None:
        """Wait for ``fresh``, give it the published weights, and make it worker ``index``."""
        timeout = settings.restart_timeout_s
        try:
            incarnation = ray.get(fresh.ready.remote(), timeout=timeout)
        except GetTimeoutError:
            raise TurnOPDError(
                f"the new {worker_name(index)} was not ready within {timeout:.0f} s "
                "(rollout_worker.restart_timeout_s); does the cluster have the resources it asks for?"
            ) from None
        while True:  # a publish_weights may land meanwhile: load until the version holds still
            ref, version = self._weights_ref, self._version
            if ref is not None:
                ray.get(fresh.load_weights.remote(ref, version, True), timeout=timeout)
            with self._changes:
                if version == self._version:
                    self._workers[index] = fresh
                    self._incarnations[index] = incarnation
                    self._worker_settings[index] = settings
                    self._lost.discard(index)
                    self.stats.replacements_by_worker[index] += 1
                    return

    def resize(self, size: int, settings: RolloutWorkerServiceSettings) -> int:
        """Grow or shrink the pool to ``size`` workers while ``play`` may run; returns the size before.

        Growing starts workers ``rollout-worker-{n}..`` with ``settings`` (refused up front, naming what is missing,
        when the cluster lacks the free resources), loads the published weights into them, and only
        then lets them play: a ``play`` in progress hands them its next chunks. Shrinking takes the
        highest-numbered workers out of dispatch, waits for the chunk each is playing, then kills them.
        """
        if size < 1:
            raise InputError(f"a rollout pool needs at least 1 worker, not {size}")
        with self._membership:
            self.own = settings
            before = len(self._workers)
            if size > before:
                self._grow(before, size, settings)
            elif size < before:
                self._shrink(before, size)
            return before

    def _grow(self, before: int, size: int, settings: RolloutWorkerServiceSettings) -> None:
        check_free_resources(
            ray.available_resources(), worker_resources(settings), size - before, "rollout worker"
        )
        actor: Any = RolloutWorker
        fresh = [
            actor.options(**worker_options(settings, i)).remote(settings, i, self._env_url, self.model)
            for i in range(before, size)
        ]
        timeout = settings.ready_timeout_s
        try:
            incarnations = ray.get([w.ready.remote() for w in fresh], timeout=timeout)
            if self._weights_ref is not None:  # publishes wait for this lock: the version holds
                ray.get(
                    [w.load_weights.remote(self._weights_ref, self._version, True) for w in fresh],
                    timeout=timeout,
                )
        except BaseException as exc:
            for worker in fresh:
                ray.kill(worker, no_restart=True)
            if isinstance(exc, GetTimeoutError):
                raise TurnOPDError(
                    f"the {size - before} new rollout worker(s) were not ready within {timeout:.0f}s "
                    f"(rollout_worker.ready_timeout_s): their {settings.models.engine} engine was still "
                    f"starting; the pool keeps its {before}"
                ) from None
            raise
        with self._changes:
            self._workers.extend(fresh)
            self._incarnations.extend(incarnations)
            self._worker_settings.extend([settings] * len(fresh))
            self._changes.notify_all()
        log.info("rollout pool grown %d -> %d workers at weights version %d", before, size, self._version)

    def _shrink(self, before: int, size: int) -> None:
        leaving = set(range(size, before))
        with self._changes:
            self._retiring |= leaving
            # their chunks, and any replacement of them, finish first
            self._changes.wait_for(lambda: not (self._busy | self._replacing) & leaving)
            handles = self._workers[size:]
            del self._workers[size:], self._incarnations[size:], self._worker_settings[size:]
            self._retiring -= leaving
            self._lost -= leaving
        for handle in handles:
            ray.kill(handle, no_restart=True)
        for index in sorted(leaving):
            wait_name_free(worker_name(index), NAMESPACE, 30.0)
        log.info("rollout pool shrunk %d -> %d workers", before, size)

    def switch_env_gateway(self, url: str) -> None:
        """Play every later request against ``url``; chunks in flight that lose episodes are played again."""
        with self._changes:
            self._env_url = url
            self._env_generation += 1
            self._changes.notify_all()

    def publish_weights(self, weights_ref: Any, version: int, *, rewind: bool = False) -> None:
        """Load ``weights_ref`` (an ObjectRef of a state dict, or the dict) into every worker as ``version``:
        a later version than the pool's, or with ``rewind`` an earlier one (a run that went back to a
        checkpoint: the learner was lost and restarted from it).

        The pool keeps the reference, so a worker Ray restarts later is reloaded before it plays.
        """
        with self._membership:
            self._publish(weights_ref, version, rewind)

    def _publish(self, weights_ref: Any, version: int, rewind: bool = False) -> None:
        next_version(self._version, version, rewind)
        if isinstance(weights_ref, Mapping):
            weights_ref = ray.put(dict(weights_ref))
        elif not isinstance(weights_ref, ray.ObjectRef):
            raise InputError(
                f"weights must be an ObjectRef or a state dict, got {type(weights_ref).__name__}"
            )
        with self._changes:
            self._weights_ref, self._version = weights_ref, version
            handles = {i: self._workers[i] for i in self._live_indices()}
        loads = {i: handle.load_weights.remote(weights_ref, version, rewind) for i, handle in handles.items()}
        for index, ref in loads.items():
            try:
                incarnation = ray.get(ref)  # the actor answers a load with its incarnation id
            except RayActorError:
                if not self._replaced(index, handles[index]):
                    self.stats.worker_deaths += 1
                    self.stats.crashes_by_worker[index] += 1
                self._recover(index)  # a restarted worker loads the new version there
                continue
            with self._changes:  # (reentrant: _replaced takes it too)
                if self._replaced(index, handles[index]):
                    continue  # an operator replaced or retired it meanwhile
                restarted = incarnation != self._incarnations[index]
                self._incarnations[index] = incarnation
            if restarted:
                # Ray restarted it while it was idle: it came back at version 0, which it may even
                # have played since, when version 0 was the published one
                log.warning("%s was restarted by Ray since the last publish", worker_name(index))
                self.stats.crashes_by_worker[index] += 1

    def own_weights(self) -> None:
        """Keep the published weights in an object this process owns.

        An ObjectRef lives only as long as the process that put it: call this before that process
        (the learner's rank 0) goes away, so a worker restarted later can still be reloaded.
        """
        with self._changes:
            ref, version = self._weights_ref, self._version
        if ref is None:
            return
        owned = ray.put(ray.get(ref))
        with self._changes:
            if self._version == version:  # else a newer publish came meanwhile, with its own reference
                self._weights_ref = owned

    def workers_versions(self) -> dict[str, int]:
        """Each live worker's weights version (asks the actors)."""
        live = self._live_indices()
        versions = ray.get([self._workers[i].weights_version.remote() for i in live])
        return {worker_name(i): int(v) for i, v in zip(live, versions, strict=True)}

    def _live_indices(self) -> list[int]:
        return [i for i in range(len(self._workers)) if i not in self._lost]

    def close(self) -> None:
        """Kill the workers for good and wait until their names are free again."""
        for worker in self._workers:
            ray.kill(worker, no_restart=True)
        deadline = time.monotonic() + 30.0
        for index in range(len(self._workers)):
            wait_name_free(worker_name(index), NAMESPACE, max(0.0, deadline - time.monotonic()))
        self._workers = []
