"""The driver's side of the rollout pool: named worker actors, work dispatch, weights, recovery.

``play`` cuts the tasks into chunks (one per worker by default: an even split) and hands each
idle worker the next chunk, so a slow or restarted worker does not hold the others back. When a
worker dies mid-play (``RayActorError``), Ray restarts it; the pool waits for it, reloads the
current weights into it, and plays that chunk again (``rollout_worker.max_attempts`` times in
all), and only then reports the chunk's tasks as ``EpisodeFailure``. Re-plays sample the same
way (chunk seeds depend on the tasks, not on the worker), and every result names the weights
version that generated it, which is always the version the caller asked for.
"""

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from services.contracts.rollout import EpisodeFailure, EpisodeTask, RolloutRequest, RolloutResult
from services.errors import InputError, TurnOPDError
from services.rollout_worker.actor import NAMESPACE, RolloutWorker, worker_name, worker_options
from services.rollout_worker.engines.base import next_version
from services.rollout_worker.seeds import derive_seed
from services.rollout_worker.task_chunks import POOL_NAME, chunk_count, merge_results, split_even
from services.rollout_worker.weights_version import StaleWeightsError
from services.settings.tree import TurnOPDSettings

log = logging.getLogger(__name__)

_DEAD_POLL_S = 0.5
_DEAD_POLLS = 20  # consecutive "actor died" answers before a worker counts as gone for good


@dataclass
class PoolStats:
    """What went wrong so far and how the pool coped."""

    worker_deaths: int = 0
    replays: int = 0  # chunks played again after a death or a stale worker
    weight_reloads: int = 0  # restarted workers brought back to the published version
    failed_chunks: int = 0


class RolloutPool:
    """``settings.cluster.rollout_workers`` actors ``rollout-worker-{i}`` (namespace ``turnopd``) playing ``model``."""

    def __init__(self, settings: TurnOPDSettings, env_gateway_url: str, model: str) -> None:
        self.settings = settings
        self.model = model
        self.stats = PoolStats()
        self._version = 0
        self._weights_ref: Any = None
        self._lost: set[int] = set()
        self._workers = [
            RolloutWorker.options(**worker_options(settings, i)).remote(settings, i, env_gateway_url, model)  # type: ignore[attr-defined]
            for i in range(settings.cluster.rollout_workers)
        ]
        timeout = settings.rollout_worker.restart_timeout_s
        try:
            ray.get([w.ready.remote() for w in self._workers], timeout=timeout)
        except GetTimeoutError:
            self.close()
            raise TurnOPDError(
                f"{len(self._workers)} rollout workers were not ready within {timeout:.0f}s; does the Ray "
                f"cluster have {settings.rollout_worker.num_cpus:g} free CPUs (and the GPUs) for each?"
            ) from None

    @property
    def weights_version(self) -> int:
        return self._version

    @property
    def live_workers(self) -> list[str]:
        return [worker_name(i) for i in range(len(self._workers)) if i not in self._lost]

    def play(
        self,
        tasks: Sequence[EpisodeTask],
        h_roll: int,
        temperature: float,
        weights_version: int,
        max_new_tokens: int | None = None,
        *,
        seed: int | None = None,
        chunk_size: int | None = None,
        on_result: Callable[[RolloutResult], None] | None = None,
    ) -> RolloutResult:
        """Play every task with weights ``weights_version``; trajectories come back in task order.

        ``chunk_size`` caps the tasks of one worker call (default: an even split, one call per
        worker); ``on_result`` sees each call's result as it arrives (progress bars).
        """
        if weights_version != self._version:
            raise StaleWeightsError(POOL_NAME, self._version, weights_version)
        started = time.perf_counter()
        chunks = split_even(len(tasks), chunk_count(len(tasks), len(self._workers), chunk_size))
        requests = [
            RolloutRequest(
                tasks=[tasks[i] for i in chunk],
                h_roll=h_roll,
                temperature=temperature,
                weights_version=weights_version,
                max_new_tokens=max_new_tokens,
                seed=None if seed is None else derive_seed("chunk", seed, chunk.start),
            )
            for chunk in chunks
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
        idle = deque(i for i in range(len(self._workers)) if i not in self._lost)
        inflight: dict[Any, tuple[int, int]] = {}
        max_attempts = self.settings.rollout_worker.max_attempts
        while pending or inflight:
            while pending and idle:
                worker, chunk = idle.popleft(), pending.popleft()
                attempts[chunk] += 1
                inflight[self._workers[worker].play.remote(requests[chunk])] = (worker, chunk)
            if not inflight:  # every worker is gone
                for chunk in pending:
                    failed[chunk] = self._fail(requests[chunk], POOL_NAME, "no rollout worker is left")
                break
            [ref], _ = ray.wait(list(inflight), num_returns=1)
            worker, chunk = inflight.pop(ref)
            try:
                result: RolloutResult = ray.get(ref)
            except (RayActorError, StaleWeightsError) as exc:
                if isinstance(exc, RayActorError):
                    self.stats.worker_deaths += 1
                    log.warning("%s died playing chunk %d: %s", worker_name(worker), chunk, exc)
                if self._recover(worker):
                    idle.append(worker)
                if attempts[chunk] < max_attempts:
                    self.stats.replays += 1
                    pending.appendleft(chunk)
                else:
                    self.stats.failed_chunks += 1
                    reason = f"played {attempts[chunk]} times without a result; last error: {exc}"
                    failed[chunk] = self._fail(requests[chunk], worker_name(worker), reason)
                continue
            results[chunk] = result
            idle.append(worker)
            if on_result is not None:
                on_result(result)
        return results, failed

    @staticmethod
    def _fail(request: RolloutRequest, worker: str, reason: str) -> list[EpisodeFailure]:
        error = " ".join(reason.split())[:2000]
        return [EpisodeFailure(task=task, error=error, worker=worker) for task in request.tasks]

    def _recover(self, index: int) -> bool:
        """Wait for Ray to restart worker ``index`` and give it the published weights; False if it is gone."""
        worker = self._workers[index]
        deadline = time.monotonic() + self.settings.rollout_worker.restart_timeout_s
        died_answers = 0
        while time.monotonic() < deadline:
            try:
                ray.get(worker.ready.remote(), timeout=max(0.1, deadline - time.monotonic()))
                held = ray.get(worker.weights_version.remote())
                if held != self._version:
                    ray.get(worker.load_weights.remote(self._weights_ref, self._version))
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
        self._lost.add(index)
        return False

    def publish_weights(self, weights_ref: Any, version: int) -> None:
        """Load ``weights_ref`` (an ObjectRef of a state dict, or the dict) into every worker as ``version``.

        The pool keeps the reference, so a worker Ray restarts later is reloaded before it plays.
        """
        next_version(self._version, version)
        if isinstance(weights_ref, Mapping):
            weights_ref = ray.put(dict(weights_ref))
        elif not isinstance(weights_ref, ray.ObjectRef):
            raise InputError(
                f"weights must be an ObjectRef or a state dict, got {type(weights_ref).__name__}"
            )
        self._weights_ref, self._version = weights_ref, version
        loads = {i: self._workers[i].load_weights.remote(weights_ref, version) for i in self._live_indices()}
        for index, ref in loads.items():
            try:
                ray.get(ref)
            except RayActorError:
                self.stats.worker_deaths += 1
                self._recover(index)  # a restarted worker loads the new version there

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
            while time.monotonic() < deadline:
                try:
                    ray.get_actor(worker_name(index), namespace=NAMESPACE)
                except ValueError:
                    break
                time.sleep(0.1)
        self._workers = []
