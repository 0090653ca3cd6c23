"""The orchestrator's side of the learner: a Ray Train TorchTrainer fed one batch per step (one CPU
worker: one plain actor, ``solo_worker``).

``TorchTrainer.fit`` runs in a background thread; each rank has an inbox, all ranks share one
outbox, every box held by one mailbox actor on the driver's node (``services.learner.mailbox``).
They carry typed messages (``LearnerInboxMessage``, ``LearnerOutboxMessage``). ``step`` shards the
batch over the ranks (balanced by tokens), waits for every rank's result and merges them into one
``LearnerStepResult`` plus the ObjectRef of the new full weights.
"""

import os
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any

import ray
from ray.train import FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

from services.cluster_capacity import actor_resource_options
from services.contracts.learner import (
    LearnerBatch,
    LearnerCheckpointed,
    LearnerCheckpointRequest,
    LearnerOutboxMessage,
    LearnerRankResult,
    LearnerReady,
    LearnerShard,
    LearnerStepped,
    LearnerStepResult,
    LearnerStop,
)
from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.errors import TurnOPDError
from services.learner.mailbox_client import MailboxTimeout, start_mailbox
from services.learner.solo_worker import SoloLearnerWorker
from services.learner.train_loop import LoopArgs, train_loop
from services.ray_session import on_driver_node
from services.settings.per_service import LearnerServiceSettings


def shard_by_tokens(lengths: list[int], world: int) -> list[list[int]]:
    """Assign sample indices to ranks, longest first to the least-loaded rank."""
    shards: list[list[int]] = [[] for _ in range(world)]
    load = [0] * world
    for i in sorted(range(len(lengths)), key=lambda j: -lengths[j]):
        r = load.index(min(load))
        shards[r].append(i)
        load[r] += lengths[i]
    return [sorted(s) for s in shards]


# Ray Train's preemption watcher is an actor per learner start (a process importing Ray, about 4
# CPU-seconds). It lets Ray Train restart workers on a draining node; with ``max_failures=0`` a lost
# learner node ends the run either way, and the run resumes from its checkpoint. Off unless the
# environment turns it on.
PREEMPTION_WATCHER_ENV = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"
POOL_RESOURCE = "learner_pool"  # the custom resource of the learner's nodes ([cluster] pool_resources)


class LearnerTrainer(TorchTrainer):
    """``TorchTrainer`` without Ray Train's datasets callback: the learner reads no Ray Dataset (its
    batches come through the mailbox), while the callback starts a ``DatasetManager`` actor on every
    fit anyway (3-5 CPU-seconds of importing Ray Data, ``bench/startup_cost.py``). Should Ray rename
    the hook, nothing is filtered and the trainer is Ray's own."""

    def _create_default_callbacks(self, *args: Any, **kwargs: Any) -> list[Any]:
        # Ray Train V2's hook (V2 is the TorchTrainer Ray 2.60 gives; V1 never calls it); mypy sees V1's class
        callbacks: list[Any] = super()._create_default_callbacks(*args, **kwargs)  # type: ignore[misc]
        return [c for c in callbacks if type(c).__name__ != "DatasetsCallback"]


def runs_solo(settings: LearnerServiceSettings) -> bool:
    """Whether the learner runs as one plain actor (``solo_worker``): one CPU worker, and the config
    does not ask for Ray Train anyway."""
    return settings.workers == 1 and not settings.on_gpu and not settings.learner.ray_train_for_one_worker


def worker_resources(settings: LearnerServiceSettings) -> dict[str, float]:
    """What one learner worker reserves, in Ray's resource names: its CPUs, its GPUs on a GPU run, and
    the learner pool's resource where the cluster has pools."""
    needs = {"CPU": settings.learner.num_cpus_per_worker}
    if settings.on_gpu:
        needs["GPU"] = settings.gpus_per_worker
    if settings.pool_resource:
        needs[POOL_RESOURCE] = 1.0
    return needs


def solo_worker_options(settings: LearnerServiceSettings) -> dict[str, Any]:
    """Ray options of the one-actor learner: what a Ray Train worker of it would reserve
    (``worker_resources``), never restarted by Ray (a lost learner ends the run with its resume
    hint, as under Ray Train's ``max_failures=0``)."""
    return {**actor_resource_options(worker_resources(settings)), "max_restarts": 0}


class LearnerError(TurnOPDError, RuntimeError):
    """The learner workers failed or stopped answering."""


def merged_step(
    batch: LearnerBatch, answers: Sequence[LearnerOutboxMessage]
) -> tuple[LearnerStepResult, Any]:
    """The ranks' answers to step ``batch.step`` as one result, and rank 0's ObjectRef of the new weights."""
    results: list[LearnerRankResult] = []
    weights_ref: Any = None
    for message in answers:
        match message:
            case LearnerStepped(result=result, weights=weights) if result.step == batch.step:
                results.append(result)
                if result.rank == 0:
                    weights_ref = weights
            case other:
                raise LearnerError(f"unexpected learner message during step {batch.step}: {other!r}"[:500])
    if weights_ref is None:
        raise LearnerError(f"no rank 0 weights among the answers to step {batch.step}")
    by_sample: dict[int, TrajectoryTurnStats] = {}
    for res in results:
        by_sample.update(zip(res.sample_ids, res.turn_stats, strict=True))
    tokens = sum(r.tokens for r in results)
    merged = LearnerStepResult(
        step=batch.step,
        loss=sum(r.weighted_loss for r in results),
        mean_kl=sum(r.kl_sum for r in results) / max(tokens, 1),
        tokens=tokens,
        grad_norm=next(r.grad_norm for r in results if r.rank == 0),
        weights_version=batch.step,
        turn_stats=TurnStatsRecord(
            step=batch.step,
            probe=batch.probe,
            alpha=batch.alpha,
            h_roll=batch.h_roll,
            trajectories=[by_sample[i] for i in range(len(batch.samples))],
        ),
        forward_backward_s=max(r.forward_backward_s for r in results),
        optimizer_s=max(r.optimizer_s for r in results),
    )
    return merged, weights_ref


class Learner:
    def __init__(self, settings: LearnerServiceSettings, run_dir: Path, model_dir: Path) -> None:
        self.settings = settings
        self.world = settings.workers
        self.solo = runs_solo(settings)
        self.mailbox, self.inboxes, self.outbox = start_mailbox(self.world, on_driver_node())
        self._error: BaseException | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        self._worker: Any = None  # the one actor of a solo learner
        self.threads: list[int] = []  # each rank's torch CPU threads, in rank order
        try:
            self.resumed_step = self._start(settings, run_dir, model_dir)
        except BaseException:
            # a learner that never started leaves no thread or queue actors behind (a failed restart
            # is tried again; each try would leak its own)
            with suppress(Exception):  # the start's own error is the one to report
                self.close()
            raise

    def _start(self, settings: LearnerServiceSettings, run_dir: Path, model_dir: Path) -> int:
        """Start the trainer's thread (or the solo actor's); the step its ranks resumed at."""
        args = LoopArgs(settings, str(run_dir.resolve()), str(model_dir.resolve()), self.inboxes, self.outbox)
        run: Callable[[], Any]
        if self.solo:
            self._worker = ray.remote(SoloLearnerWorker).options(**solo_worker_options(settings)).remote()
            run = partial(ray.get, self._worker.run.remote(args))
        else:
            run = self._trainer(settings, run_dir, args).fit
        self._thread = threading.Thread(target=self._fit, args=(run,), name="learner-fit", daemon=True)
        self._thread.start()
        ready: list[LearnerReady] = []
        for message in self._answers("start"):
            match message:
                case LearnerReady():
                    ready.append(message)
                case other:
                    raise LearnerError(f"unexpected learner message {type(other).__name__} at start")
        ready.sort(key=lambda r: r.rank)
        self.threads = [r.threads for r in ready]
        return ready[0].resumed_step

    def _trainer(self, settings: LearnerServiceSettings, run_dir: Path, args: LoopArgs) -> LearnerTrainer:
        """Ray Train's worker group of ``self.world`` ranks, each running the loop on ``args``."""
        os.environ.setdefault(PREEMPTION_WATCHER_ENV, "0")  # read by Ray Train's controller actor
        return LearnerTrainer(
            train_loop,
            train_loop_config={"args": args},  # Ray Train's config is a dict
            scaling_config=ScalingConfig(
                num_workers=self.world,
                use_gpu=settings.on_gpu,
                resources_per_worker=worker_resources(settings),
            ),
            run_config=RunConfig(
                name="learner",
                storage_path=str((run_dir / "ray_train").resolve()),
                failure_config=FailureConfig(max_failures=0),
            ),
        )

    @property
    def alive(self) -> bool:
        """The trainer is running and has not failed."""
        thread = self._thread
        return thread is not None and thread.is_alive() and self._error is None and not self._closed

    def _fit(self, run: Callable[[], Any]) -> None:
        try:
            run()
        except BaseException as exc:  # surfaced to the caller by _next and close
            self._error = exc

    def _answers(self, what: str) -> list[LearnerOutboxMessage]:
        """One outbox message from each rank, for ``what`` (the start, a step, a checkpoint)."""
        return [self._next(what) for _ in range(self.world)]

    def _next(self, what: str) -> LearnerOutboxMessage:
        waited = 0.0
        while True:
            try:
                message: LearnerOutboxMessage = self.outbox.get(timeout=5.0)
                return message
            except MailboxTimeout:
                waited += 5.0
                if self._error is not None or self._thread is None or not self._thread.is_alive():
                    raise LearnerError(f"learner workers stopped: {self._error!r}") from self._error
                if waited >= self.settings.learner.step_timeout_s:
                    raise LearnerError(f"no answer from the learner in {waited:.0f} s ({what})") from None

    def step(self, batch: LearnerBatch) -> tuple[LearnerStepResult, Any]:
        """Run one optimizer step; return the merged result and the ObjectRef of the new weights."""
        shards = shard_by_tokens([len(s.token_ids) for s in batch.samples], self.world)
        for inbox, ids in zip(self.inboxes, shards, strict=True):
            inbox.put(LearnerShard(step=batch.step, samples=[batch.samples[i] for i in ids], sample_ids=ids))
        return merged_step(batch, self._answers(f"step {batch.step}"))

    def checkpoint(self, step: int) -> None:
        """Have every rank checkpoint the weights of ``step`` (the last one run) unless that is on disk."""
        for inbox in self.inboxes:
            inbox.put(LearnerCheckpointRequest(step=step))
        done: list[int] = []
        for message in self._answers(f"checkpoint of step {step}"):
            match message:
                case LearnerCheckpointed(step=checkpointed):
                    done.append(checkpointed)
                case other:
                    raise LearnerError(
                        f"unexpected learner message {type(other).__name__} during a checkpoint"
                    )
        if any(d != step for d in done):
            raise LearnerError(f"asked for a checkpoint of step {step}, got {done}")

    def close(self) -> None:
        """Stop the workers and wait for the trainer to finish (a second call does nothing)."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            for inbox in self.inboxes:
                with suppress(Exception):  # a lost mailbox: the ranks' reads fail and they stop anyway
                    inbox.put(LearnerStop())
            self._thread.join(timeout=120)
        if ray.is_initialized():
            for actor in (self._worker, self.mailbox):
                if actor is not None:
                    with suppress(Exception):  # already gone with its node or the cluster
                        ray.kill(actor)
        if ray.is_initialized() and self._error is not None:
            raise LearnerError(
                f"learner workers failed (a rank raised, or its process or node was lost): {self._error!r}"
            ) from self._error
