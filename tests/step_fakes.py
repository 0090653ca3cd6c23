"""Fake step services (no Ray) for the orchestrator's unit tests: a controller, a rollout pool that
hands its trajectories over in two chunks, a teacher whose scores follow from the tokens, a learner,
and an in-memory store for the real controller service."""

import asyncio
import dataclasses

import numpy as np

from services.contracts.controller import ProbeStats, StepDecision, StepPlan
from services.contracts.controller_state import ControllerState
from services.contracts.learner import LearnerBatch, LearnerStepResult
from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.contracts.rollout import EpisodeTask, RolloutResult
from services.contracts.teacher import TeacherContext
from services.contracts.trajectory import Trajectory, TurnRecord
from services.controller.store import StateStore
from services.orchestrator.busy_time import PoolActivity
from services.orchestrator.dispatcher import Dispatcher
from services.orchestrator.planner import Planner
from services.orchestrator.run_plan import LoopSettings
from services.orchestrator.source_mix import StepSources
from services.orchestrator.step_loop import StepLoop
from services.teacher_scorer.engine import RowScores
from services.teacher_scorer.validation import SequenceTooLongError

TOP_K = 2


def trajectory(episode_id, spans):
    turns = [
        TurnRecord(index=i, response_start=a, response_end=b, action="go", accepted=True, observation="o")
        for i, (a, b) in enumerate(spans)
    ]
    n = sum(b - a for a, b in spans)
    return Trajectory(
        episode_id=episode_id, env="alfworld", split="train", token_ids=list(range(12)), turns=turns,
        sampler_logprobs=[-0.5] * n, reward=1.0, success=episode_id == "a", truncated=False, weights_version=3,
    )  # fmt: skip


TRAJECTORIES = [
    trajectory("a", [(2, 4), (6, 7)]),
    trajectory("b", [(3, 3)]),  # nothing to supervise
    trajectory("c", [(1, 2)]),
    trajectory("d", [(2, 5)]),
]
TASKS = [EpisodeTask(env="alfworld", split="train", seed=i) for i in range(4)]


class FakeController:
    def __init__(self):
        self.ingested: list[tuple[int, ProbeStats | None]] = []

    def plan(self, step, lag=0):
        return StepPlan(step=step, probe=True, h_roll=6, h_hat=3, alpha=0.5, weights_version=step - 1)

    def ingest(self, step, stats, lag=0):
        self.ingested.append((step, stats))
        return StepDecision(step=step, probe=True, h_roll=6, h_hat=3, h_bar=4.5, h_eff=1, h_cov=2, h_ctrl=2)


class FakePool:
    """Plays the fixed trajectories in two chunks, reporting each through ``on_result``."""

    def __init__(self, trajectories=TRAJECTORIES):
        self.trajectories = trajectories
        self.published: list[tuple[object, int]] = []
        self.weights_version = 3

    def play(self, tasks, h_roll, temperature, weights_version, on_result=None):
        self.tasks = tasks
        half = len(self.trajectories) // 2
        for part in (self.trajectories[:half], self.trajectories[half:]):
            if on_result is not None:
                on_result(self.result(part))
        return self.result(self.trajectories)

    def result(self, trajectories):
        return RolloutResult(
            trajectories=trajectories, failures=[], worker="rollout-pool", weights_version=self.weights_version,
            generated_tokens=sum(len(t.sampler_logprobs) for t in trajectories), wall_s=1.0,
        )  # fmt: skip

    def publish_weights(self, weights_ref, version, rewind=False):
        self.published.append((weights_ref, version))
        self.weights_version = version


class FakeTeacher:
    """Top-K ids of a position are (token, token + 1); its entropy is a tenth of its index. It
    scores sequences of up to ``max_context`` tokens."""

    def __init__(self, max_context=8192):
        self.requests: list[list[int]] = []  # the positions of each row, per request
        self.lengths: list[list[int]] = []  # the tokens of each row, per request
        self.context = TeacherContext(max_context=max_context, token_budget=16384)

    async def limits(self):
        return self.context

    async def score_rows(self, rows, top_k):
        self.requests.append([len(r.positions_P) for r in rows])
        self.lengths.append([r.length for r in rows])
        for i, row in enumerate(rows):
            if row.length > self.context.max_length:
                raise SequenceTooLongError(i, row.length, self.context)
        out = []
        for row in rows:
            ids = np.stack([row.token_ids_T[row.positions_P], row.token_ids_T[row.positions_P] + 1], axis=1)
            lps = np.full(ids.shape, -0.25, dtype=np.float32)
            entropy = (row.positions_P / 10).astype(np.float32)
            out.append(RowScores(ids, lps, lps[:, 0], entropy))
        return out


class FakeLearner:
    def __init__(self):
        self.batches: list[LearnerBatch] = []

    def step(self, batch):
        self.batches.append(batch)
        stats = [
            TrajectoryTurnStats(
                turn_tokens=[sum(1 for t in s.turn_index if t == turn) for turn in range(s.num_turns)],
                turn_kl_sum=[0.5] * s.num_turns,
                success=s.success,
                truncated=s.truncated,
                turn_entropy_sum=s.turn_entropy_sum,
            )
            for s in batch.samples
        ]
        record = TurnStatsRecord(
            step=batch.step, probe=batch.probe, alpha=batch.alpha, h_roll=batch.h_roll, trajectories=stats
        )
        result = LearnerStepResult(
            step=batch.step, loss=0.25, mean_kl=0.5, tokens=sum(len(s.positions) for s in batch.samples),
            grad_norm=1.0, weights_version=batch.step, turn_stats=record, forward_backward_s=0.0, optimizer_s=0.0,
        )  # fmt: skip
        return result, f"weights-{batch.step}"


class MemoryStore(StateStore):
    """The controller's state, decisions and probes in memory; ``reads`` counts reads of the decisions."""

    def __init__(self) -> None:
        self.state: ControllerState | None = None
        self.saved: list[StepDecision] = []
        self.stats: dict[int, ProbeStats] = {}
        self.reads = 0

    def load(self):
        return self.state

    def save(self, state, decision, stats):
        self.state = state
        if decision is not None:
            self.saved.append(decision)
        if stats is not None:
            self.stats[stats.step] = stats

    def rewind(self, state):
        self.state = state
        self.saved = self.saved[: state.depth.step]
        self.stats = {k: v for k, v in self.stats.items() if k <= state.depth.step}

    def restore(self, state, decisions, seen):
        assert self.state == seen
        self.state, self.saved = state, list(decisions)

    def decisions(self):
        self.reads += 1
        return list(self.saved)

    def probes(self):
        return dict(self.stats)

    def ping(self):
        pass


def step_loop(
    settings, start, controller, pool, teacher, tasks_of, evaluate=lambda step, s: None, steps=None
):
    """The driver's step loop over the given services, from ``start`` to ``steps`` (default: the
    settings'), with the parts `turnopd train` gives it."""
    plan = LoopSettings.of(settings)
    if steps is not None:
        plan = dataclasses.replace(plan, steps=steps, evals=dataclasses.replace(plan.evals, last_step=steps))
    planner = Planner(controller, StepSources.of(settings), plan.staleness)
    dispatcher = Dispatcher(plan.play, pool, teacher, PoolActivity())
    return StepLoop(plan, start, planner, dispatcher, tasks_of, evaluate, lambda ref: f"own-{ref}")


def run_step(k, tasks, settings, controller, pool, teacher, learner, cumulative_s):
    """Step k alone, as the loop runs it after step k-1: its outcome."""
    outcomes = []
    loop = step_loop(settings, k - 1, controller, pool, teacher, lambda j: tasks, steps=k)
    asyncio.run(loop.run(learner, cumulative_s, outcomes.append))
    (outcome,) = outcomes
    return outcome
