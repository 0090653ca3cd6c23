"""What a resume may cut back: never a step a checkpoint covered, so a run never restarts silently.

A resume goes on from the learner's newest checkpoint at or below the last step the logs hold (one
above it is of a step whose log lines never landed, and is dropped) and cuts every log back to
that step. The logged steps after that checkpoint are trained again: nothing else holds them.

The rule: once the logs reach the first step the learner checkpoints (``[learner]
checkpoint_every``, or the run's last step if that comes first), a checkpoint at or below the last
logged step must survive and load, as the driver prunes one only once a newer one is logged
(``prune_checkpoints``). If none does, the resume would start over at step 0 and erase the run's
logs: it refuses with an InputError naming the run directory and what is missing, before it deletes
anything. Before that first step (a fresh run, or ``checkpoint_every`` = 2 with step 1 logged),
starting at step 0 is the resume, and it erases only steps no checkpoint ever held.
"""

from pathlib import Path

from services.errors import InputError
from services.learner.checkpoint import complete_checkpoints, latest_checkpoint


def first_checkpoint_step(checkpoint_every: int, steps: int) -> int:
    """The first step the learner saves a checkpoint after (every ``checkpoint_every``, and the last)."""
    return min(checkpoint_every, steps)


def check_stop_after(stop_after: int, last_logged: int, checkpoint_every: int, steps: int) -> None:
    """A sitting may end after a step the run has still to train, and one the learner checkpoints
    (every ``checkpoint_every``, and the last), so that a resume goes on from it; else InputError."""
    if not 1 <= stop_after <= steps:
        raise InputError(f"stop after step {stop_after}: the run's steps are 1..{steps}")
    if stop_after <= last_logged:
        raise InputError(f"stop after step {stop_after}: the run has already logged step {last_logged}")
    if stop_after != steps and stop_after % checkpoint_every:
        below = stop_after - stop_after % checkpoint_every
        near = ", ".join(str(k) for k in (below, below + checkpoint_every) if last_logged < k <= steps)
        raise InputError(
            f"stop after step {stop_after}: the learner checkpoints every {checkpoint_every} steps "
            f"([learner] checkpoint_every), so a resume would train steps after {below} again; "
            f"stop after {near or steps}"
        )


def check_before_drop(run_root: Path, last_logged: int, first_checkpoint: int) -> None:
    """Before the checkpoints above ``last_logged`` are dropped: once the logs reach ``first_checkpoint``,
    an intact one at or below it must exist (``latest_checkpoint``); else InputError, nothing deleted."""
    if last_logged < first_checkpoint or latest_checkpoint(run_root, at_most=last_logged) is not None:
        return
    held = ", ".join(path.name for path in reversed(complete_checkpoints(run_root))) or "none"
    raise InputError(
        f"cannot resume {run_root}: its logs reach step {last_logged}, but {run_root / 'checkpoints'} "
        f"holds no intact checkpoint of step {last_logged} or before (it holds: {held}); resuming "
        f"would start over at step 0 and erase the logs of steps 1..{last_logged}. Nothing was changed"
    )


def check_resumed(run_root: Path, resumed: int, last_logged: int, first_checkpoint: int) -> None:
    """After the learner started at step ``resumed``, before the logs are cut back to it: InputError if
    it started over at step 0 although the logs reach ``first_checkpoint`` (no checkpoint loaded)."""
    if resumed > 0 or last_logged < first_checkpoint:
        return
    raise InputError(
        f"cannot resume {run_root}: its logs reach step {last_logged}, but no checkpoint in "
        f"{run_root / 'checkpoints'} of step {last_logged} or before loads (the learner's log says why "
        f"each was skipped); resuming would start over at step 0 and erase the logs of steps "
        f"1..{last_logged}. The logs were left as they are"
    )
