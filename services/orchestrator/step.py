"""One synchronous TurnOPD step: plan -> rollouts -> teacher scores -> learner update -> controller ingest.

Every collaborator is passed in (controller client, rollout pool, teacher client, learner), so the
same function runs on the embedded default and on a cluster.
"""

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Protocol

from services.contracts.controller import ProbeStats, StepDecision, StepPlan
from services.contracts.learner import LearnerBatch, LearnerStepResult
from services.contracts.orchestrator import StepMetrics, StepTimes
from services.contracts.rollout import EpisodeTask, RolloutResult
from services.errors import TurnOPDError
from services.orchestrator.probe_stats import probe_stats
from services.orchestrator.step_data import learner_batch, supervised_trajectories
from services.orchestrator.teacher_scores import teacher_scores
from services.settings.tree import TurnOPDSettings
from services.teacher_scorer.handle_client import TeacherHandleClient


class RolloutPoolLike(Protocol):
    def play(
        self, tasks: list[EpisodeTask], h_roll: int, temperature: float, weights_version: int
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
    rollout = pool.play(tasks, plan.h_roll, settings.rollout.temperature, plan.weights_version)
    if not rollout.trajectories:
        raise NoTrajectoriesError(f"step {k}: all {len(tasks)} episodes failed: {rollout.failures[:3]}")
    t2 = time.perf_counter()
    supervised = supervised_trajectories(rollout.trajectories)
    scores = asyncio.run(teacher_scores(teacher, supervised, settings.distill.distill_topk))
    batch = learner_batch(plan, supervised, scores, settings.blend.min_floor, settings.blend.min_frac)
    t3 = time.perf_counter()
    result, weights_ref = learner.step(batch)
    t4 = time.perf_counter()
    pool.publish_weights(weights_ref, result.weights_version)
    stats = probe_stats(result.turn_stats) if plan.probe else None
    decision = controller.ingest(k, stats)
    t5 = time.perf_counter()
    trajs = rollout.trajectories
    times = StepTimes(
        rollout_s=t2 - t1,
        teacher_s=t3 - t2,
        learner_s=t4 - t3,
        other_s=(t1 - t0) + (t5 - t4),
        total_s=t5 - t0,
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
        times=times,
        cumulative_s=cumulative_s + times.total_s,
    )
    return StepOutcome(plan=plan, decision=decision, result=result, metrics=metrics)
