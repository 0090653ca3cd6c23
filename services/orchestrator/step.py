"""One synchronous TurnOPD step: plan -> rollouts -> teacher scores -> learner update -> controller ingest.

With ``[pipeline] stream_teacher`` the teacher scores each rollout chunk as soon as the pool hands it
over, while the step's other chunks still play; the learner still gets the whole batch, in the same
order. Every collaborator is passed in (controller client, rollout pool, teacher client, learner),
so the same function runs on the embedded default and on a cluster.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from services.contracts.controller import ProbeStats, StepDecision, StepPlan
from services.contracts.learner import LearnerBatch, LearnerStepResult
from services.contracts.orchestrator import StepMetrics, StepTimes
from services.contracts.rollout import EpisodeTask, RolloutResult
from services.contracts.trajectory import Trajectory
from services.errors import TurnOPDError
from services.orchestrator.busy_time import Interval, busy_seconds, overlap_seconds, shared_seconds
from services.orchestrator.probe_stats import probe_stats
from services.orchestrator.step_data import TeacherScores, learner_batch, supervised_trajectories
from services.orchestrator.teacher_scores import ScoreStream, score_after_rollouts
from services.settings.tree import TurnOPDSettings
from services.teacher_scorer.handle_client import TeacherHandleClient


class RolloutPoolLike(Protocol):
    def play(
        self,
        tasks: list[EpisodeTask],
        h_roll: int,
        temperature: float,
        weights_version: int,
        *,
        on_result: Callable[[RolloutResult], None] | None = None,
    ) -> RolloutResult: ...

    def publish_weights(self, weights_ref: Any, version: int) -> None: ...


class ControllerLike(Protocol):
    def plan(self, step: int) -> StepPlan: ...

    def ingest(self, step: int, stats: ProbeStats | None) -> StepDecision: ...


class LearnerLike(Protocol):
    def step(self, batch: LearnerBatch) -> tuple[LearnerStepResult, Any]: ...


@dataclass(frozen=True)
class StepOutcome:
    plan: StepPlan
    decision: StepDecision
    result: LearnerStepResult
    metrics: StepMetrics


class NoTrajectoriesError(TurnOPDError, RuntimeError):
    """Every episode of a step failed: there is nothing to train on."""


@dataclass(frozen=True)
class Played:
    """A step's rollouts and the teacher's scores of its supervised trajectories (batch order)."""

    rollout: RolloutResult
    supervised: list[Trajectory]
    scores: list[TeacherScores]
    rollouts_done: float  # perf_counter when the pool returned
    teacher_intervals: list[Interval]  # when each teacher request was in flight


def play_and_score(
    k: int,
    tasks: list[EpisodeTask],
    plan: StepPlan,
    settings: TurnOPDSettings,
    pool: RolloutPoolLike,
    teacher: TeacherHandleClient,
) -> Played:
    """Play step k's tasks and score them: after the rollouts, or streamed while they play."""
    temperature, top_k = settings.rollout.temperature, settings.distill.distill_topk
    if not settings.pipeline.stream_teacher:
        rollout = pool.play(tasks, plan.h_roll, temperature, plan.weights_version)
        done = _played(k, tasks, rollout)
        supervised = supervised_trajectories(rollout.trajectories)
        scores, intervals = score_after_rollouts(teacher, supervised, top_k)
        return Played(rollout, supervised, scores, done, intervals)
    with ScoreStream(teacher, top_k) as stream:
        rollout = pool.play(tasks, plan.h_roll, temperature, plan.weights_version, on_result=stream.submit)
        done = _played(k, tasks, rollout)
        supervised = supervised_trajectories(rollout.trajectories)
        scores = stream.collect(supervised)
    return Played(rollout, supervised, scores, done, stream.intervals)


def _played(k: int, tasks: list[EpisodeTask], rollout: RolloutResult) -> float:
    """When the rollouts ended; NoTrajectoriesError if no episode was played."""
    if not rollout.trajectories:
        raise NoTrajectoriesError(f"step {k}: all {len(tasks)} episodes failed: {rollout.failures[:3]}")
    return time.perf_counter()


def run_step(
    k: int,
    tasks: list[EpisodeTask],
    settings: TurnOPDSettings,
    controller: ControllerLike,
    pool: RolloutPoolLike,
    teacher: TeacherHandleClient,
    learner: LearnerLike,
    cumulative_s: float,
) -> StepOutcome:
    """Run optimizer step k end to end and return what to log."""
    t0 = time.perf_counter()
    plan = controller.plan(k)
    t1 = time.perf_counter()
    played = play_and_score(k, tasks, plan, settings, pool, teacher)
    rollout, t2 = played.rollout, played.rollouts_done
    blend = settings.blend
    batch = learner_batch(plan, played.supervised, played.scores, blend.min_floor, blend.min_frac)
    t3 = time.perf_counter()
    result, weights_ref = learner.step(batch)
    t4 = time.perf_counter()
    pool.publish_weights(weights_ref, result.weights_version)
    stats = probe_stats(result.turn_stats) if plan.probe else None
    decision = controller.ingest(k, stats)
    t5 = time.perf_counter()
    trajs = rollout.trajectories
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
    metrics = StepMetrics(
        step=k,
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
        tokens=result.tokens,
        generated_tokens=rollout.generated_tokens,
        weights_version=result.weights_version,
        rollout_weights_version=plan.weights_version,
        weights_lag=k - 1 - plan.weights_version,
        times=times,
        cumulative_s=cumulative_s + times.total_s,
    )
    return StepOutcome(plan=plan, decision=decision, result=result, metrics=metrics)
