"""One step over fake services (no Ray): what the learner receives, what is logged, what is published."""

import asyncio
import time

import pytest
from step_fakes import TASKS, TOP_K, FakeController, FakeLearner, FakePool, FakeTeacher

from services.orchestrator.step import NoTrajectoriesError, run_step
from services.settings.tree import TurnOPDSettings


def settings(stream_teacher=False):
    return TurnOPDSettings.model_validate(
        {
            "distill": {"distill_topk": TOP_K},
            "blend": {"min_floor": 1},
            "pipeline": {"stream_teacher": stream_teacher},
        }
    )


class SlowPool(FakePool):
    """The second chunk finishes 0.3 s after the first."""

    def play(self, tasks, h_roll, temperature, weights_version, on_result=None):
        half = len(self.trajectories) // 2
        if on_result is not None:
            on_result(self.result(self.trajectories[:half]))
        time.sleep(0.3)
        if on_result is not None:
            on_result(self.result(self.trajectories[half:]))
        return self.result(self.trajectories)


class SlowTeacher(FakeTeacher):
    """Each request takes 0.1 s."""

    async def score_rows(self, rows, top_k):
        await asyncio.sleep(0.1)
        return await super().score_rows(rows, top_k)


def test_step_trains_on_the_supervised_trajectories_with_their_teacher_scores():
    controller, pool, teacher, learner = FakeController(), FakePool(), FakeTeacher(), FakeLearner()
    out = run_step(4, TASKS, settings(), controller, pool, teacher, learner, cumulative_s=10.0)

    (batch,) = learner.batches
    assert (batch.step, batch.probe, batch.alpha, batch.h_roll) == (4, True, 0.5, 6)
    assert [s.positions for s in batch.samples] == [[2, 3, 6], [1], [2, 3, 4]]  # a, c, d: b dropped
    assert [s.teacher_top_ids.unpack()[:, 0].tolist() for s in batch.samples] == [[2, 3, 6], [1], [2, 3, 4]]
    assert [h for s in batch.samples for h in s.turn_entropy_sum or []] == pytest.approx([0.5, 0.6, 0.1, 0.9])
    assert sum(w for s in batch.samples for w in s.token_weights) == pytest.approx(1.0)
    # the learner's turn statistics come back with the entropy: nothing is patched afterwards
    assert out.result.turn_stats.trajectories[0].turn_entropy_sum == pytest.approx([0.5, 0.6])
    assert pool.published == [("weights-4", 4)]
    ((step, stats),) = controller.ingested
    assert step == 4 and stats is not None and stats.survivors == [3, 1]
    m = out.metrics
    assert (m.trajectories, m.success_rate, m.tokens, m.weights_version) == (4, 0.25, 7, 4)
    assert (m.rollout_weights_version, m.weights_lag) == (3, 0)  # played with the weights step 4 updated
    times = m.times
    assert times.total_s == pytest.approx(
        times.rollout_s + times.teacher_s + times.learner_s + times.other_s, abs=1e-9
    )
    # one after the other: each pool busy in its own phase, never two at once
    assert (times.rollout_busy_s, times.learner_busy_s) == (times.rollout_s, times.learner_s)
    assert times.teacher_busy_s is not None and times.teacher_busy_s <= times.teacher_s
    assert times.overlap_s == 0.0
    assert m.cumulative_s == pytest.approx(10.0 + times.total_s)


def test_step_without_trajectories_fails():
    with pytest.raises(NoTrajectoriesError, match="step 2: all 4 episodes failed"):
        run_step(2, TASKS, settings(), FakeController(), FakePool([]), FakeTeacher(), FakeLearner(), 0.0)


def test_streamed_scoring_gives_the_learner_the_same_batch():
    batches, requests = [], []
    for stream in (False, True):
        teacher, learner = FakeTeacher(), FakeLearner()
        run_step(4, TASKS, settings(stream), FakeController(), FakePool(), teacher, learner, 0.0)
        batches.append(learner.batches[0])
        requests.append(teacher.requests)
    assert batches[0] == batches[1]
    assert requests == [[[3, 1, 3]], [[3], [1, 3]]]  # one request after the rollouts; one per chunk


def test_streamed_scoring_overlaps_the_rollouts():
    streamed = run_step(
        4, TASKS, settings(True), FakeController(), SlowPool(), SlowTeacher(), FakeLearner(), 0.0
    ).metrics.times
    assert streamed.rollout_s >= 0.3
    assert streamed.teacher_busy_s is not None and streamed.teacher_busy_s >= 0.2  # two requests
    assert streamed.teacher_overlap_s is not None and streamed.teacher_overlap_s >= 0.05  # the first chunk's
    assert streamed.overlap_s == pytest.approx(streamed.teacher_overlap_s)  # teacher beside the rollouts
    assert streamed.rollout_busy_s == streamed.rollout_s
    synchronous = run_step(
        4, TASKS, settings(False), FakeController(), SlowPool(), SlowTeacher(), FakeLearner(), 0.0
    ).metrics.times
    assert synchronous.teacher_busy_s is not None and synchronous.teacher_busy_s >= 0.1
    assert synchronous.teacher_overlap_s == 0.0 and synchronous.teacher_s >= 0.1
