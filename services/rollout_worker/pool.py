"""The driver's side of the rollout pool: named worker actors, work dispatch, weights, recovery.

``play`` cuts the tasks into chunks (one per worker by default: an even split) and hands each
idle worker the next chunk, so a slow or restarted worker does not hold the others back. When a
worker dies mid-play (``RayActorError``), Ray restarts it; the pool reloads the current weights into
it once it is back (the others play on meanwhile), and plays that chunk again
(``rollout_worker.max_attempts`` times in all), and only then reports the chunk's tasks as
``EpisodeFailure``. Re-plays sample the same way (chunk seeds depend on the tasks, not on the
worker), and every result names the weights version that generated it, which is always the version
the caller asked for.

A chunk that lost episodes to the env gateway is played again too (``chunk_dispatch.py``).

Operations (`turnopd restart`, `scale`, a gateway switch, a publish) are messages
(``pool_messages.py``) applied (``pool_operations.py``) by the one thread that owns the pool at a
time (``pool_owner.py``): a ``play`` owns it for its whole play and applies them between chunks;
otherwise the caller applies its own. No lock guards the members: only their owner touches them,
and other threads read the tuple of them it publishes. A worker's way up (a replacement, a growth,
a restart Ray makes, a weights load) is a ``Start`` whose Ray calls the owner waits for beside the
chunks in flight (``worker_starts.py``), so the other workers keep playing meanwhile. A replaced
worker's chunk in flight dies with its old actor and is played again; a shrink takes the leaving
workers out of dispatch, lets each finish its chunk, then kills it. A publish is applied between
plays.
"""

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import ray
from ray.exceptions import GetTimeoutError

from services.contracts.rollout import EpisodeTask, RolloutRequest, RolloutResult
from services.errors import InputError, TurnOPDError
from services.ray_names import NAMESPACE
from services.ray_names import ROLLOUT_POOL as POOL_NAME
from services.ray_session import wait_name_free
from services.rollout_worker.actor import start_worker, worker_name
from services.rollout_worker.chunk_dispatch import ChunkDispatch
from services.rollout_worker.chunk_ledger import ChunkLedger, InFlight
from services.rollout_worker.pool_members import Member, Roster, Start
from services.rollout_worker.pool_messages import (
    Close,
    KeepWeights,
    PoolMessage,
    PublishWeights,
    ReplaceWorker,
    Resize,
    SwitchGateway,
)
from services.rollout_worker.pool_operations import PoolOperations, check_index
from services.rollout_worker.pool_owner import Owner
from services.rollout_worker.pool_stats import PoolStats
from services.rollout_worker.seeds import derive_seed
from services.rollout_worker.task_chunks import depth_chunks, merge_results
from services.rollout_worker.weights_version import StaleWeightsError
from services.settings.per_service import RolloutWorkerServiceSettings

log = logging.getLogger(__name__)

_INBOX_POLL_S = 0.1  # how often an owner waiting on Ray looks at its inbox


class RolloutPool:
    """``workers`` actors ``rollout-worker-{i}`` (namespace ``turnopd``) playing ``model``.

    ``own``: what each worker is given, and what the pool itself reads of it (``[rollout_worker]``
    ``max_attempts``, ``chunk_timeout_s``, ``restart_timeout_s``): the settings of the pool's last
    start, resize or ``retune`` (a `rollout-pool` restart with a new config), never the run's tree.
    """

    def __init__(
        self, own: RolloutWorkerServiceSettings, workers: int, env_gateway_url: str, model: str
    ) -> None:
        self.model = model
        self.stats = PoolStats()
        self._owner: Owner[PoolMessage] = Owner()
        # the owner's state: only the thread holding the owner's role changes it (other threads read
        # the roster's view and the operations' settings, weights and gateway, each replaced whole)
        self._roster = Roster()
        self._ops = PoolOperations(self._roster, self.stats, own, model, env_gateway_url)
        self._dispatch = ChunkDispatch(self._roster, self._ops.starts, self.stats, lambda: self._ops.gateway)
        handles = [start_worker(own, i, env_gateway_url, model) for i in range(workers)]
        for handle in handles:
            self._roster.append(Member(handle, own, None))
        timeout = own.ready_timeout_s
        try:
            incarnations = ray.get([handle.ready.remote() for handle in handles], timeout=timeout)
        except GetTimeoutError:
            self.close()
            raise TurnOPDError(
                f"{workers} rollout workers were not ready within {timeout:.0f}s "
                f"(rollout_worker.ready_timeout_s): their {own.models.engine} engine of "
                f"{own.models.student!r} was still starting; raise the timeout if the engine is slow to "
                f"start here (vLLM's CPU build), else check that the Ray cluster has "
                f"{own.rollout_worker.num_cpus:g} free CPUs (and the GPUs) for each"
            ) from None
        for index, incarnation in enumerate(incarnations):
            self._roster.set(index, replace(self._roster[index], incarnation=incarnation))

    # --- read from any thread -------------------------------------------------------------------

    @property
    def own(self) -> RolloutWorkerServiceSettings:
        return self._ops.own

    @property
    def weights_version(self) -> int:
        return self._ops.published.version

    @property
    def env_gateway_url(self) -> str:
        return self._ops.gateway.url

    @property
    def size(self) -> int:
        return len(self._roster.view)

    def worker_settings(self, index: int) -> RolloutWorkerServiceSettings:
        """The settings worker ``index`` was (re)started with."""
        view = self._roster.view
        check_index(index, len(view))
        return view[index].settings

    def members(self) -> list[tuple[int, RolloutWorkerServiceSettings, bool]]:
        """(index, settings, live) of every worker, read at one moment (a resize may run meanwhile)."""
        return [(i, m.settings, m.live) for i, m in enumerate(self._roster.view)]

    @property
    def live_workers(self) -> list[str]:
        return [worker_name(i) for i, m in enumerate(self._roster.view) if m.live]

    def workers_versions(self) -> dict[str, int]:
        """Each live worker's weights version (asks the actors)."""
        live = [(i, m.handle) for i, m in enumerate(self._roster.view) if m.live]
        versions = ray.get([handle.weights_version.remote() for _, handle in live])
        return {worker_name(i): int(v) for (i, _), v in zip(live, versions, strict=True)}

    def retune(self, settings: RolloutWorkerServiceSettings) -> None:
        """Read the pool's own knobs from ``settings`` from now on (every worker was replaced with them)."""
        self._ops.own = settings

    # --- the data path --------------------------------------------------------------------------

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
        worker); ``on_result`` sees each call's result as it arrives (progress bars), on the thread
        that owns the pool: it must not call the pool's operations.
        """
        depths = [h_roll] * len(tasks) if isinstance(h_roll, int) else list(h_roll)
        if len(depths) != len(tasks):
            raise InputError(f"{len(depths)} rollout depths for {len(tasks)} tasks")
        started = time.perf_counter()
        with self._owner.role():
            if weights_version != self._ops.published.version:
                raise StaleWeightsError(POOL_NAME, self._ops.published.version, weights_version)
            pieces = depth_chunks(depths, len(self._roster), chunk_size)
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
            knobs = self.own.rollout_worker
            ledger = ChunkLedger(requests, knobs.max_attempts, knobs.chunk_timeout_s)
            self._ops.playing = True
            try:
                self._run(ledger, on_result)
            finally:
                self._ops.playing = False
                self._dispatch.abandon(ledger)
        chunks = [chunk for chunk, _ in pieces]
        elapsed = time.perf_counter() - started
        return merge_results(tasks, chunks, ledger.results, ledger.failed, weights_version, elapsed)

    def _run(
        self, ledger: ChunkLedger | None = None, on_result: Callable[[RolloutResult], None] | None = None
    ) -> None:
        """The owner's loop: apply the inbox, hand out chunks, take what Ray answers first, until
        the play (if any) is over and no operation is under way."""
        while True:
            self._ops.apply_inbox(self._owner.take())
            if ledger is not None:
                self._dispatch.hand_out(ledger)
            if self._at_rest(ledger):
                return
            self._wait(ledger, on_result)

    def _at_rest(self, ledger: ChunkLedger | None) -> bool:
        """Nothing left to do: a play's publishes put off are the next owner's (their posters wait)."""
        return (
            (ledger is None or ledger.finished())
            and not self._ops.busy(playing=ledger is not None)
            and self._owner.inbox_empty()
        )

    def _wait(self, ledger: ChunkLedger | None, on_result: Callable[[RolloutResult], None] | None) -> None:
        """Wait for the first answer of a chunk or a start (or a deadline, or the inbox's next look) and take it."""
        now = time.monotonic()
        calls: dict[Any, InFlight | Start] = dict(ledger.inflight) if ledger is not None else {}
        starts = self._ops.starts
        calls.update(starts.calls())
        times = [now + _INBOX_POLL_S, starts.next_time()]
        if ledger is not None:
            times.extend(ledger.due.values())
            if ledger.gateway_wait is not None:
                times.append(ledger.gateway_wait[1])
        timeout = max(0.0, min(times) - now)
        if calls:
            done, _ = ray.wait(list(calls), num_returns=1, timeout=timeout)
        else:
            time.sleep(timeout)
            done = []
        for ref in done:
            job = calls[ref]
            if isinstance(job, Start):
                starts.answered(job)
            elif ledger is not None:
                self._dispatch.back(ledger, ref, on_result)
        now = time.monotonic()
        if ledger is not None:
            self._dispatch.on_time(ledger, now)
        starts.on_time(now)
        self._ops.check()

    # --- operations: messages to the owner ------------------------------------------------------

    def replace_worker(self, index: int, settings: RolloutWorkerServiceSettings | None = None) -> None:
        """Replace worker ``index`` by a fresh actor (new ``settings`` if given) at the published weights.

        Safe while ``play`` runs in another thread: the old actor's chunk fails and is played again
        (by the new actor or another worker). A fresh actor that does not come up is killed and its
        name freed before this raises; the worker keeps its old settings (its old actor is gone).
        """
        self._owner.ask(ReplaceWorker(index, settings), self._run)

    def resize(self, size: int, settings: RolloutWorkerServiceSettings) -> int:
        """Grow or shrink the pool to ``size`` workers while ``play`` may run; returns the size before.

        Growing starts workers ``rollout-worker-{n}..`` with ``settings`` (refused up front, naming what is missing,
        when the cluster lacks the free resources), loads the published weights into them, and only
        then lets them play: a ``play`` in progress hands them its next chunks. Shrinking takes the
        highest-numbered workers out of dispatch, waits for the chunk each is playing, then kills them.
        """
        if size < 1:
            raise InputError(f"a rollout pool needs at least 1 worker, not {size}")
        before: int = self._owner.ask(Resize(size, settings), self._run)
        return before

    def switch_env_gateway(self, url: str) -> None:
        """Play every later request against ``url``; chunks in flight that lose episodes are played again."""
        self._owner.ask(SwitchGateway(url), self._run)

    def publish_weights(self, weights_ref: Any, version: int, *, rewind: bool = False) -> None:
        """Load ``weights_ref`` (an ObjectRef of a state dict, or the dict) into every worker as ``version``:
        a later version than the pool's, or with ``rewind`` an earlier one (a run that went back to a
        checkpoint: the learner was lost and restarted from it). Applied between plays.

        The pool keeps the reference, so a worker Ray restarts later is reloaded before it plays.
        """
        self._owner.ask(PublishWeights(weights_ref, version, rewind), self._run)

    def own_weights(self) -> None:
        """Keep the published weights in an object this process owns.

        An ObjectRef lives only as long as the process that put it: call this before that process
        (the learner's rank 0) goes away, so a worker restarted later can still be reloaded.
        """
        published = self._ops.published
        if published.ref is None:
            return
        owned = ray.put(ray.get(published.ref))
        self._owner.ask(KeepWeights(owned, published.version), self._run)

    def close(self) -> None:
        """Kill the workers for good and wait until their names are free again."""
        count = len(self._roster.view)
        self._owner.ask(Close(), self._run)
        deadline = time.monotonic() + 30.0
        for index in range(count):
            wait_name_free(worker_name(index), NAMESPACE, max(0.0, deadline - time.monotonic()))
