"""One synchronous TurnOPD step: plan -> rollouts -> teacher scores -> learner update -> controller ingest;
and the pieces the overlapped pipeline (``pipeline.py``, ``[pipeline] max_staleness`` >= 1) shares with it.

With ``[pipeline] stream_teacher`` the teacher scores each rollout chunk as soon as the pool hands it
over, while the step's other chunks still play; the learner still gets the whole batch, in the same
order.

Every task is played within its teacher's limit (asked before the step). A trajectory that still
cannot be scored or trained on (no response fit at all; longer than a teacher restarted mid-step
now takes) is dropped from the step: it becomes a failed episode with its reason
(``EpisodeFailure.reason``), logged once with its task, and the loss weights are computed without
it. A step with nothing left to train on stops the run (``NoTrajectoriesError``).

Every collaborator is passed in (controller client, rollout pool, teacher client, learner), so the
same function runs on the embedded default and on a cluster.
"""

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from services.contracts.controller import StepDecision, StepPlan
from services.contracts.learner import LearnerBatch, LearnerStepResult
from services.contracts.orchestrator import SourceStepMetrics, StepMetrics, StepTimes
from services.contracts.records import TurnStatsRecord
from services.contracts.rollout import EpisodeFailure, EpisodeTask, FailureReason, RolloutResult
from services.contracts.trajectory import Trajectory
from services.errors import InputError, TurnOPDError
from services.orchestrator.busy_time import (
    Interval,
    PoolActivity,
    busy_seconds,
    overlap_seconds,
    shared_seconds,
)
from services.orchestrator.source_mix import ControllerLike, SourceBatch, StepSources, mixed_learner_batch
from services.orchestrator.step_data import TeacherScores, has_supervised_tokens, supervised_trajectories
from services.orchestrator.teacher_scores import (
    Scored,
    ScoreStream,
    TeacherLimits,
    Teachers,
    Unscored,
    limit_of,
    score_after_rollouts,
    teacher_limits,
)
from services.settings.tree import TurnOPDSettings

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
    rollouts_done: float  # perf_counter when the pool returned
    teacher_intervals: list[Interval]  # when each teacher request was in flight


def play_and_score(
    k: int,
    tasks: list[EpisodeTask],
    depths: int | Sequence[int],
    weights_version: int,
    settings: TurnOPDSettings,
    pool: RolloutPoolLike,
    teacher: Teachers,
    activity: PoolActivity | None = None,
) -> Played:
    """Play step k's tasks (``depths``: the turn cap of all, or of each) with ``weights_version`` and
    score them, each by its source's teacher: after the rollouts, or streamed while they play.

    ``activity``: where the rollout pool's and the teacher's work is also marked as it happens.
    """
    temperature, top_k = settings.rollout.temperature, settings.distill.distill_topk
    limits = teacher_limits(teacher)  # each step: a teacher restarted with a new limit counts from now
    tasks = tasks_within(tasks, limits)
    rollout_busy = nullcontext() if activity is None else activity.busy("rollout")
    if not settings.pipeline.stream_teacher:
        with rollout_busy:
            rollout = pool.play(tasks, depths, temperature, weights_version)
        done = _played(k, tasks, rollout)
        supervised = supervised_trajectories(rollout.trajectories)
        scored, intervals = score_after_rollouts(teacher, supervised, top_k, activity, limits)
        return trained_part(k, tasks, Played(rollout, supervised, [], done, intervals), scored, settings)
    with ScoreStream(teacher, top_k, activity, limits) as stream:
        with rollout_busy:
            rollout = pool.play(tasks, depths, temperature, weights_version, on_result=stream.submit)
        done = _played(k, tasks, rollout)
        supervised = supervised_trajectories(rollout.trajectories)
        scored = stream.collect(supervised)
    played = Played(rollout, supervised, [], done, stream.intervals)
    return trained_part(k, tasks, played, scored, settings)


def tasks_within(tasks: Sequence[EpisodeTask], limits: TeacherLimits) -> list[EpisodeTask]:
    """``tasks``, each limited to what its teacher scores (``EpisodeTask.max_tokens``)."""
    out = []
    for task in tasks:
        limit = limit_of(limits, task.env)
        out.append(task if limit is None else task.model_copy(update={"max_tokens": limit.max_length}))
    return out


def _played(k: int, tasks: list[EpisodeTask], rollout: RolloutResult) -> float:
    """When the rollouts ended; NoTrajectoriesError if no episode was played."""
    if not rollout.trajectories:
        raise NoTrajectoriesError(f"step {k}: all {len(tasks)} episodes failed: {rollout.failures[:3]}")
    return time.perf_counter()


def trained_part(
    k: int, tasks: Sequence[EpisodeTask], played: Played, scored: Sequence[Scored], settings: TurnOPDSettings
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
            reason, error = "no_response", _no_response_text(tr, task, settings.models.max_new_tokens)
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
        return Played(rollout, played.supervised, scores, played.rollouts_done, played.teacher_intervals)
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
    return Played(trimmed, trajectories, scores, played.rollouts_done, played.teacher_intervals)


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


def run_step(
    k: int,
    tasks: list[EpisodeTask],
    settings: TurnOPDSettings,
    controller: ControllerLike,
    pool: RolloutPoolLike,
    teacher: Teachers,
    learner: LearnerLike,
    cumulative_s: float,
    sources: StepSources | None = None,
) -> StepOutcome:
    """Run optimizer step k end to end and return what to log (``sources``: the run's task sources,
    each planned, scored and ingested by its own controller and teacher; default: the settings')."""
    sources = sources or StepSources.of(settings)
    t0 = time.perf_counter()
    plans = sources.plans(controller, k)
    t1 = time.perf_counter()
    played = play_and_score(
        k, tasks, sources.depths(plans, tasks), plans[0].weights_version, settings, pool, teacher
    )
    rollout, t2 = played.rollout, played.rollouts_done
    parts = sources.parts(plans, played.supervised, played.scores)
    batch = mixed_learner_batch(k, parts)
    t3 = time.perf_counter()
    result, weights_ref = learner.step(batch)
    t4 = time.perf_counter()
    pool.publish_weights(weights_ref, result.weights_version)
    records = sources.turn_stats(result.turn_stats, parts)
    decisions = sources.ingest(controller, k, parts, records)
    t5 = time.perf_counter()
    busy = {"rollout": [(t1, t2)], "teacher": played.teacher_intervals, "learner": [(t3, t4)]}
    times = StepTimes(
        rollout_s=t2 - t1,
        teacher_s=t3 - t2,
        learner_s=t4 - t3,
        other_s=(t1 - t0) + (t5 - t4),
        total_s=t5 - t0,
        teacher_busy_s=busy_seconds(played.teacher_intervals),
        teacher_overlap_s=overlap_seconds(played.teacher_intervals, (t1, t2)),
        rollout_busy_s=t2 - t1,
        learner_busy_s=t4 - t3,
        overlap_s=shared_seconds(busy.values(), (t0, t5)),
    )
    metrics = step_metrics(settings, parts, decisions, result, rollout, times, cumulative_s)
    return StepOutcome(
        plan=plans[0], decision=decisions[0], result=result, metrics=metrics,
        decisions=tuple(decisions), turn_stats=tuple(records),
    )  # fmt: skip


def step_metrics(
    settings: TurnOPDSettings,
    parts: Sequence[SourceBatch],
    decisions: Sequence[StepDecision],
    result: LearnerStepResult,
    rollout: RolloutResult,
    times: StepTimes,
    cumulative_s: float,
) -> StepMetrics:
    """The ``metrics.jsonl`` line of the step; ``cumulative_s`` is the sum of the steps before. The
    controller's fields are the first source's; a multi-source step lists every source's in ``sources``."""
    trajs = rollout.trajectories
    plan, decision = parts[0].plan, decisions[0]
    return StepMetrics(
        step=plan.step,
        method=settings.run.method,
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
        sources=source_metrics(parts, decisions, rollout) if settings.sources else None,
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


def overlapped_times(
    window: Interval,
    took: float,
    learned: float,
    played: Played,
    played_from: float,
    ready: float,
    busy: dict[str, float],
    shared: float,
) -> StepTimes:
    """The time split of an overlapped step (``[pipeline] max_staleness`` >= 1), from the learner's side.

    ``window`` runs from when the learner began waiting for the step's batch to when the step was
    ingested; the batch came at ``took`` and the update ended at ``learned``. The wait counts as
    rollout while the step's rollouts (``played_from`` .. ``played.rollouts_done``) still played,
    as teacher until the batch was ready (``ready``), and as other for the rest (e.g. a plan
    waiting on the controller); so the phases add up to ``total_s``, as in the synchronous step.
    ``busy``: each pool's busy seconds within ``window`` (any step's work); ``shared``: the
    seconds two or more were busy at once.
    """
    waiting = (window[0], took)
    rollout_s = overlap_seconds([(played_from, played.rollouts_done)], waiting)
    teacher_s = overlap_seconds([(played.rollouts_done, ready)], waiting)
    learner_s, total_s = learned - took, window[1] - window[0]
    return StepTimes(
        rollout_s=rollout_s,
        teacher_s=teacher_s,
        learner_s=learner_s,
        other_s=max(0.0, total_s - rollout_s - teacher_s - learner_s),
        total_s=total_s,
        teacher_busy_s=busy["teacher"],
        teacher_overlap_s=overlap_seconds(played.teacher_intervals, (played_from, played.rollouts_done)),
        rollout_busy_s=busy["rollout"],
        learner_busy_s=busy["learner"],
        overlap_s=shared,
    )
