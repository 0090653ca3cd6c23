"""The pieces of one TurnOPD step the step loop (``step_loop.py``) puts together: what a step
played and trains on, the trajectories it drops, its metrics line and its time split.

Every task is played within its teacher's limit (asked before the step). A trajectory that still
cannot be scored or trained on (no response fit at all; longer than a teacher restarted mid-step
now takes) is dropped from the step: it becomes a failed episode with its reason
(``EpisodeFailure.reason``), logged once with its task, and the loss weights are computed without
it. A step with nothing left to train on stops the run (``NoTrajectoriesError``).
"""

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from services.contracts.controller import StepDecision, StepPlan
from services.contracts.learner import LearnerBatch, LearnerStepResult
from services.contracts.orchestrator import SourceStepMetrics, StepMetrics, StepTimes
from services.contracts.records import TurnStatsRecord
from services.contracts.rollout import (
    INFRA_FAILURES,
    EpisodeFailure,
    EpisodeTask,
    FailureReason,
    RolloutResult,
)
from services.contracts.trajectory import Trajectory
from services.errors import InputError, TurnOPDError
from services.orchestrator.busy_time import Interval, overlap_seconds
from services.orchestrator.source_mix import SourceBatch
from services.orchestrator.step_data import TeacherScores, has_supervised_tokens
from services.orchestrator.teacher_scores import Scored, TeacherLimits, Unscored, limit_of

log = logging.getLogger(__name__)


class RolloutPoolLike(Protocol):
    @property
    def weights_version(self) -> int: ...

    def play(
        self,
        tasks: list[EpisodeTask],
        h_roll: int | Sequence[int],
        temperature: float,
        weights_version: int,
        *,
        on_result: Callable[[RolloutResult], None] | None = None,
    ) -> RolloutResult: ...

    def publish_weights(self, weights_ref: Any, version: int) -> None: ...


class LearnerLike(Protocol):
    def step(self, batch: LearnerBatch) -> tuple[LearnerStepResult, Any]: ...


@dataclass(frozen=True)
class StepOutcome:
    """A step's outcome: the first source's plan and decision (the only ones of a single-source
    step), every source's decisions and turn statistics as logged."""

    plan: StepPlan
    decision: StepDecision
    result: LearnerStepResult
    metrics: StepMetrics
    decisions: tuple[StepDecision, ...]
    turn_stats: tuple[TurnStatsRecord, ...]


class NoTrajectoriesError(TurnOPDError, RuntimeError):
    """Every episode of a step failed (or was dropped): there is nothing to train on."""


@dataclass(frozen=True)
class Played:
    """A step's rollouts and the teacher's scores of the trajectories it trains on (batch order);
    ``rollout.failures`` also holds the trajectories the step dropped."""

    rollout: RolloutResult
    supervised: list[Trajectory]
    scores: list[TeacherScores]
    rollouts_started: float  # perf_counter when the pool began playing
    rollouts_done: float  # when it returned
    teacher_intervals: list[Interval]  # when each teacher request was in flight


def tasks_within(tasks: Sequence[EpisodeTask], limits: TeacherLimits) -> list[EpisodeTask]:
    """``tasks``, each limited to what its teacher scores (``EpisodeTask.max_tokens``)."""
    out = []
    for task in tasks:
        limit = limit_of(limits, task.env)
        out.append(task if limit is None else task.model_copy(update={"max_tokens": limit.max_length}))
    return out


class InfraFailuresError(TurnOPDError, RuntimeError):
    """Too many of a step's episodes failed for the system's reasons (``INFRA_FAILURES``)."""


def played_at(
    k: int, tasks: Sequence[EpisodeTask], rollout: RolloutResult, max_infra_frac: float = 1.0
) -> float:
    """When the rollouts ended. NoTrajectoriesError if no episode was played; InfraFailuresError if
    more than ``max_infra_frac`` of them failed for the system's reasons (the gateway or a rollout
    worker lost them even after the pool's replays): the step would train on what the failures
    left, a biased batch."""
    infra = Counter(f.reason for f in rollout.failures if f.reason in INFRA_FAILURES)
    if sum(infra.values()) > max_infra_frac * len(tasks):
        counts = ", ".join(f"{n} {why}" for why, n in sorted(infra.items()))
        first = next(f for f in rollout.failures if f.reason in INFRA_FAILURES)
        raise InfraFailuresError(
            f"step {k}: {sum(infra.values())} of {len(tasks)} episodes failed for the system's reasons "
            f"({counts}), more than [rollout] max_infra_failure_frac = {max_infra_frac:g} of them; e.g. "
            f"{first.error}. The run stops rather than train on the rest"
        )
    if not rollout.trajectories:
        raise NoTrajectoriesError(f"step {k}: all {len(tasks)} episodes failed: {rollout.failures[:3]}")
    return time.perf_counter()


def trained_part(
    k: int, tasks: Sequence[EpisodeTask], played: Played, scored: Sequence[Scored], max_new_tokens: int
) -> Played:
    """``played`` without the trajectories that cannot be trained on: those without a response (no
    turn fit their limit) and those their teacher left ``Unscored``. Each becomes a failed episode
    with its reason, logged here, once, with its task; NoTrajectoriesError if none is left.
    ``scored``: the teacher's answer for each of ``played.supervised``."""
    rollout = played.rollout
    if len(scored) != len(played.supervised):
        raise InputError(f"{len(scored)} teacher answers for {len(played.supervised)} trajectories")
    answers = {id(tr): s for tr, s in zip(played.supervised, scored, strict=True)}
    kept: list[int] = []
    scores: list[TeacherScores] = []
    dropped: list[EpisodeFailure] = []
    for i, tr in enumerate(rollout.trajectories):
        task = _task_of(rollout, tasks, i)
        answer = answers.get(id(tr)) if has_supervised_tokens(tr) else None
        if isinstance(answer, TeacherScores):
            kept.append(i)
            scores.append(answer)
            continue
        reason: FailureReason
        if isinstance(answer, Unscored):
            reason, error = "too_long", answer.reason
        else:
            reason, error = "no_response", _no_response_text(tr, task, max_new_tokens)
        log.warning(
            "step %d: dropped episode %s (%s): %s; task %s",
            k,
            tr.episode_id,
            reason,
            error,
            task.model_dump(exclude_none=True),
        )
        dropped.append(EpisodeFailure(task=task, error=error, worker=rollout.worker, reason=reason))
    if not dropped:
        return dataclasses.replace(played, scores=scores)
    failures = [*rollout.failures, *dropped]
    if not kept:
        counts = ", ".join(f"{n} {why}" for why, n in Counter(f.reason for f in failures).items())
        raise NoTrajectoriesError(
            f"step {k}: all {len(tasks)} episodes failed or were dropped ({counts}); e.g. {failures[0].error}"
        )
    trajectories = [rollout.trajectories[i] for i in kept]
    indices = None if rollout.task_indices is None else [rollout.task_indices[i] for i in kept]
    trimmed = RolloutResult(
        trajectories=trajectories,
        failures=failures,
        worker=rollout.worker,
        weights_version=rollout.weights_version,
        generated_tokens=rollout.generated_tokens,  # they were generated all the same
        wall_s=rollout.wall_s,
        task_indices=indices,
    )
    return dataclasses.replace(played, rollout=trimmed, supervised=trajectories, scores=scores)


def _task_of(rollout: RolloutResult, tasks: Sequence[EpisodeTask], i: int) -> EpisodeTask:
    """The task trajectory ``i`` of ``rollout`` played."""
    if rollout.task_indices is not None:
        return tasks[rollout.task_indices[i]]
    if len(rollout.trajectories) == len(tasks):
        return tasks[i]  # every task played, in order
    raise InputError("the rollout result does not say which task each trajectory plays")


def _no_response_text(trajectory: Trajectory, task: EpisodeTask, max_new_tokens: int) -> str:
    limit = "the student's positions" if task.max_tokens is None else f"its limit of {task.max_tokens} tokens"
    return (
        f"no response fit: its first prompt of {len(trajectory.token_ids)} tokens and a response of up "
        f"to {max_new_tokens} tokens exceed {limit}"
    )


def step_metrics(
    method: str,
    multi_source: bool,
    parts: Sequence[SourceBatch],
    decisions: Sequence[StepDecision],
    result: LearnerStepResult,
    rollout: RolloutResult,
    times: StepTimes,
    cumulative_s: float,
) -> StepMetrics:
    """The ``metrics.jsonl`` line of the step; ``cumulative_s`` is the sum of the steps before. The
    controller's fields are the first source's; a multi-source step lists every source's in
    ``sources``."""
    trajs = rollout.trajectories
    plan, decision = parts[0].plan, decisions[0]
    return StepMetrics(
        step=plan.step,
        method=method,
        probe=plan.probe,
        h_roll=plan.h_roll,
        h_hat=plan.h_hat,
        h_bar=decision.h_bar,
        h_eff=decision.h_eff,
        h_cov=decision.h_cov,
        h_ctrl=decision.h_ctrl,
        alpha=plan.alpha,
        loss=result.loss,
        mean_kl=result.mean_kl,
        grad_norm=result.grad_norm,
        success_rate=sum(t.success for t in trajs) / len(trajs),
        truncated_rate=sum(t.truncated for t in trajs) / len(trajs),
        mean_turns=sum(len(t.turns) for t in trajs) / len(trajs),
        trajectories=len(trajs),
        failed_episodes=len(rollout.failures),
        failure_reasons=dict(Counter(f.reason for f in rollout.failures)) or None,
        tokens=result.tokens,
        generated_tokens=rollout.generated_tokens,
        weights_version=result.weights_version,
        rollout_weights_version=plan.weights_version,
        weights_lag=plan.step - 1 - plan.weights_version,
        times=times,
        cumulative_s=cumulative_s + times.total_s,
        sources=source_metrics(parts, decisions, rollout) if multi_source else None,
    )


def source_metrics(
    parts: Sequence[SourceBatch], decisions: Sequence[StepDecision], rollout: RolloutResult
) -> list[SourceStepMetrics]:
    """Each source's controller fields and rollouts of a multi-source step."""
    out = []
    for part, decision in zip(parts, decisions, strict=True):
        trajs = [t for t in rollout.trajectories if t.env == part.source.env]
        n = max(len(trajs), 1)
        out.append(
            SourceStepMetrics(
                env=part.source.env,
                probe=part.plan.probe,
                h_roll=part.plan.h_roll,
                h_hat=part.plan.h_hat,
                h_bar=decision.h_bar,
                h_eff=decision.h_eff,
                h_cov=decision.h_cov,
                h_ctrl=decision.h_ctrl,
                alpha=part.plan.alpha,
                success_rate=sum(t.success for t in trajs) / n,
                mean_turns=sum(len(t.turns) for t in trajs) / n,
                trajectories=len(trajs),
                failed_episodes=sum(1 for f in rollout.failures if f.task.env == part.source.env),
            )
        )
    return out


def step_times(
    window: Interval,
    took: float,
    learned: float,
    played: Played,
    ready: float,
    busy: dict[str, float],
    shared: float,
    evaluations: Sequence[Interval] = (),
) -> StepTimes:
    """The time split of a step, from the learner's side, at any ``[pipeline] max_staleness``.

    ``window`` runs from when the learner began waiting for the step's batch to when the step was
    ingested; the batch came at ``took`` and the update ended at ``learned``. The wait counts as
    rollout while the step's rollouts still played,
    as teacher until the batch was ready (``ready``), and as other for the rest (a publish, a plan
    waiting on the controller); so the phases add up to ``total_s``. An evaluation the learner
    waited on (``evaluations``) is not the step's time: it is left out of ``total_s`` (and so of
    ``cumulative_s``), as it is of a synchronous step. ``busy``: each pool's busy seconds within
    ``window`` (any step's work, an evaluation's too); ``shared``: the seconds two or more were
    busy at once.
    """
    waiting = (window[0], took)
    rollout_s = overlap_seconds([(played.rollouts_started, played.rollouts_done)], waiting)
    teacher_s = overlap_seconds([(played.rollouts_done, ready)], waiting)
    evaluating_s = overlap_seconds(evaluations, waiting)
    learner_s = learned - took
    total_s = max(window[1] - window[0] - evaluating_s, rollout_s + teacher_s + learner_s)
    return StepTimes(
        rollout_s=rollout_s,
        teacher_s=teacher_s,
        learner_s=learner_s,
        other_s=total_s - rollout_s - teacher_s - learner_s,
        total_s=total_s,
        teacher_busy_s=busy["teacher"],
        teacher_overlap_s=overlap_seconds(
            played.teacher_intervals, (played.rollouts_started, played.rollouts_done)
        ),
        rollout_busy_s=busy["rollout"],
        learner_busy_s=busy["learner"],
        overlap_s=shared,
    )
