"""A lost learner restarted by the run, not by the user (``[learner] max_restarts``).

When an update fails because the learner is gone (a rank or its process killed, its node or its
mailbox lost), the step loop stops with the pool idle; the run then does in place what
``turnopd train --resume`` does, while every other service keeps running: drops a checkpoint of a
step the logs do not hold, starts a new learner from the latest checkpoint, cuts the logs back to
it, rewinds every controller to it and publishes its weights to the pool (an older version than
the pool's: a rewind). The steps since that checkpoint are played again, with the same seeds, so
at ``max_staleness = 0`` the finished run equals an uninterrupted one. Each recovery is a line in
``restarts.jsonl`` and in `turnopd status`; after ``max_restarts`` of them a lost learner stops
the run with the resume hint, as before.
"""

import logging
import time
from collections.abc import Callable
from pathlib import Path

from ray.exceptions import RayActorError

from services.contracts.operations import RestartResult
from services.errors import InputError
from services.learner.checkpoint import drop_checkpoints_after
from services.models.registry import resolve_model_dir
from services.operations.live_status import LiveRun
from services.operations.restarts import ServiceRestarts
from services.operations.stack import Stack
from services.orchestrator.resume_checks import check_before_drop
from services.run_dir import METRICS_FILE, RESTARTS_FILE, RunDir

log = logging.getLogger(__name__)


class LearnerRecovery:
    def __init__(
        self,
        max_restarts: int,
        first_checkpoint: int,
        stack: Stack,
        run: RunDir,
        restarts: ServiceRestarts,
        live: LiveRun,
    ) -> None:
        self.max_restarts = max_restarts
        self.first_checkpoint = first_checkpoint
        self.stack = stack
        self.run = run
        self.restarts = restarts
        self.live = live
        self.used = 0

    def may_recover(self, error: BaseException) -> bool:
        """Whether the update that raised ``error`` lost the learner and a new one is started (else
        the run stops with it: a learner that is still up refused the batch, which a new one would
        refuse again)."""
        if not learner_lost(error, self.stack.learner.alive):
            return False
        if self.used < self.max_restarts:
            return True
        log.error(
            "the learner was lost (%s: %s) after %d restarts by the run ([learner] max_restarts = %d)",
            type(error).__name__,
            error,
            self.used,
            self.max_restarts,
        )
        return False

    def recover(self, error: BaseException, line_up: Callable[[int, int], None]) -> int:
        """Start a new learner and line the run up with its checkpoint (``line_up(checkpoint,
        last_logged)``); the step training goes on after."""
        began, t0 = time.time(), time.perf_counter()
        lost_at = self.live.steps_done + 1
        log.warning(
            "the learner was lost in step %d (%s: %s); restarting it from its latest checkpoint",
            lost_at,
            type(error).__name__,
            error,
        )
        last_logged = max(self.run.steps_logged(METRICS_FILE), default=0)
        check_before_drop(self.run.root, last_logged, self.first_checkpoint)
        drop_checkpoints_after(self.run.root, last_logged)  # a checkpoint of a step not logged is not resumed
        checkpoint = self.stack.services.learner.recover()
        line_up(checkpoint, last_logged)
        self.used += 1
        self.live.rewound(checkpoint)
        again = _played_again(checkpoint, last_logged)
        result = RestartResult(
            request_id=f"learner-lost-{self.used}",
            service="learner",
            ok=True,
            message=(
                f"learner lost in step {lost_at} ({type(error).__name__}); restarted by the run from the "
                f"checkpoint of step {checkpoint} (restart {self.used} of {self.max_restarts}){again}"
            ),
            started_at=began,
            seconds=time.perf_counter() - t0,
            step=checkpoint,
        )
        self.run.append(RESTARTS_FILE, result.model_dump_json())
        self.restarts.history.append(result)
        self.live.publish()
        log.warning("%s (%.1f s)", result.message, result.seconds)
        return checkpoint


def _played_again(checkpoint: int, last_logged: int) -> str:
    if last_logged <= checkpoint:
        return ""
    if last_logged == checkpoint + 1:
        return f"; step {last_logged} is played again"
    return f"; steps {checkpoint + 1}..{last_logged} are played again"


def learner_lost(error: BaseException, alive: bool) -> bool:
    """Whether an update failed because the learner is gone: its trainer is no longer up, or an
    actor it talks to (the solo worker, the mailbox) died under the call."""
    if not alive:
        return True
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, RayActorError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def initial_weights(student: str, cache_dir: Path | None) -> dict[str, object]:
    """The student's weights before any step (version 0), from its checkpoint directory's safetensors."""
    from safetensors.torch import load_file

    directory = resolve_model_dir(student, cache_dir)
    files = sorted(Path(directory).glob("*.safetensors"))
    if not files:
        raise InputError(
            f"the learner was lost before its first checkpoint and the student's weights in {directory} "
            f"are not in safetensors files: the pool cannot go back to version 0; resume the run with "
            f"`turnopd train --resume`"
        )
    weights: dict[str, object] = {}
    for file in files:
        weights.update(load_file(file))
    return weights
