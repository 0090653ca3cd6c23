"""`learner`: the trainer, behind the lifecycle interface (``ManagedService``)."""

import time
from collections import Counter

import ray

from services.cluster_capacity import missing_resources
from services.contracts.operations import ServiceStatus
from services.learner.service import Learner, worker_resources
from services.models.registry import resolve_model_dir
from services.operations.learner_handle import LearnerHandle
from services.operations.managed_service import Change, ManagedService, RunBrokenError, RunContext, started
from services.operations.restart_rules import RESTART_ERRORS, start_or_restore
from services.operations.rollout_pool_ops import RolloutPoolOps
from services.operations.run_pieces import RunPieces
from services.settings.per_service import LearnerServiceSettings


class ResumeMismatchError(RunBrokenError):
    """A replaced learner did not resume at the completed step: going on would skip or repeat steps."""


class LearnerUnplaceable(RunBrokenError):
    """A lost learner cannot be restarted by the run: the cluster has no room for one. ``closing``:
    what closing the lost trainer raised (how it failed), the error the run stops with."""

    def __init__(self, message: str, closing: Exception | None = None) -> None:
        super().__init__(message)
        self.closing = closing


class LearnerLostError(RunBrokenError):
    """A learner restart failed and so did starting one with the old settings: no learner is left."""


class LearnerOps(ManagedService[LearnerServiceSettings]):
    """The learner (Ray Train, or one plain actor); the pipeline steps it through ``handle``, which a replacement keeps."""

    kind = "learner"
    handle: LearnerHandle | None = None

    def __init__(self, ctx: RunContext, counts: Counter[str], pool: RolloutPoolOps) -> None:
        super().__init__(ctx, counts)
        self.pool = pool

    def compose(self, run: RunPieces) -> LearnerServiceSettings:
        return run.learner

    def _learner(self, settings: LearnerServiceSettings) -> Learner:
        models = self.ctx.pieces.models
        return Learner(settings, self.ctx.run.root, resolve_model_dir(models.student, models.cache_dir))

    def start(self) -> None:
        self.handle = LearnerHandle(self._learner(self.settings))
        # Before a learner closes, the pool copies the weights it put that the pool still holds.
        self.handle.keep_before_close(lambda: started(self.pool.pool, "rollout pool").own_weights())

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.close()

    def replace(self, change: Change, step: int) -> str:
        """Only between steps (the driver's thread): checkpoint, close, resume in a new trainer."""
        handle = started(self.handle, self.kind)
        new = self.restarted(change)
        if step > 0:
            handle.checkpoint(step)
        handle.retire()
        try:
            self.settings = start_or_restore(lambda s: self._resume(handle, s, step), new, self.settings)
        except RunBrokenError:
            raise
        except RESTART_ERRORS as exc:
            if not handle.alive:  # the retired trainer is all the handle has: the next step would fail
                raise LearnerLostError(
                    f"no learner could be started after a failed restart ({type(exc).__name__}: {exc}); "
                    f"the run stops at step {step}"
                ) from exc
            raise  # a trainer with the old settings took over: reported, training goes on
        self.counts[self.kind] += 1
        return f"learner replaced; resumed from the checkpoint of step {step}"

    def recover(self, capacity_wait_s: float = 30.0) -> int:
        """Replace a trainer that was lost (a rank, its process, node or mailbox gone) by a new one
        resuming from the latest checkpoint on disk; the step it resumed at. Its weights in the
        object store went with it: the caller republishes the checkpoint's.

        ``LearnerUnplaceable`` if the cluster has no room for it within ``capacity_wait_s`` (its
        node is gone and no other has the learner's resources): nothing is started."""
        handle = started(self.handle, self.kind)
        closing: Exception | None = None
        try:
            handle.current.close()  # frees what it still holds (its mailbox, a rank still up)
        except Exception as exc:  # how it failed: what the run reports if it cannot go on
            closing = exc
        needs, deadline = worker_resources(self.settings), time.monotonic() + capacity_wait_s
        while short := missing_resources(ray.available_resources(), needs, self.settings.workers):
            if time.monotonic() > deadline:
                lacking = ", ".join(f"{name} {amount:g} more" for name, amount in sorted(short.items()))
                raise LearnerUnplaceable(
                    f"no room for a new learner of {self.settings.workers} worker(s) after "
                    f"{capacity_wait_s:g} s: the cluster is short of {lacking}",
                    closing,
                )
            time.sleep(0.5)  # the lost trainer's resources come free as Ray notices its death
        learner = self._learner(self.settings)
        handle.attach(learner)
        self.counts[self.kind] += 1
        return learner.resumed_step

    def _resume(self, handle: LearnerHandle, settings: LearnerServiceSettings, step: int) -> None:
        learner = self._learner(settings)
        handle.attach(learner)
        if learner.resumed_step != step:
            raise ResumeMismatchError(
                f"the new learner resumed at step {learner.resumed_step}, not at the completed step {step}"
            )

    def status(self, step: int) -> list[ServiceStatus]:
        handle = started(self.handle, self.kind)
        return [
            ServiceStatus(
                name="learner",
                health="ok" if handle.alive else "down",
                restarts=self.counts[self.kind],
                version=f"step {step}, config {self.version()}",
                detail="one actor, without Ray Train"
                if handle.solo
                else f"Ray Train, {handle.world} worker(s)",
            )
        ]
