"""One step of the driver's step loop at ``max_staleness = 0``, over fake services (no Ray): what the
learner receives, what is logged, what is published."""

import asyncio
import time

import pytest
from step_fakes import (
    TASKS,
    TOP_K,
    TRAJECTORIES,
    FakeController,
    FakeLearner,
    FakePool,
    FakeTeacher,
    run_step,
)

from services.contracts.controller import StepDecision, StepPlan
from services.contracts.rollout import EpisodeFailure, EpisodeTask
from services.orchestrator.step import InfraFailuresError, NoTrajectoriesError
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
    assert [len(s.token_ids) for s in batch.samples] == [7, 2, 5]  # each up to its last response token
    assert [s.teacher_top_ids.unpack()[:, 0].tolist() for s in batch.samples] == [[2, 3, 6], [1], [2, 3, 4]]
    assert [h for s in batch.samples for h in s.turn_entropy_sum or []] == pytest.approx([0.5, 0.6, 0.1, 0.9])
    assert sum(w for s in batch.samples for w in s.token_weights) == pytest.approx(1.0)
    # the learner's turn statistics come back with the entropy: nothing is patched afterwards
    assert out.result.turn_stats.trajectories[0].turn_entropy_sum == pytest.approx([0.5, 0.6])
    assert pool.published == [("weights-4", 4)]
    ((step, stats),) = controller.ingested
    assert step == 4 and stats is not None and stats.survivors == [3, 1]
    m = out.metrics
    # b has no response to train on: dropped, and counted as a failed episode with its reason
    assert (m.trajectories, m.success_rate, m.tokens, m.weights_version) == (3, 1 / 3, 7, 4)
    assert (m.failed_episodes, m.failure_reasons) == (1, {"no_response": 1})
    assert (m.rollout_weights_version, m.weights_lag) == (3, 0)  # played with the weights step 4 updated
    times = m.times
    assert times.total_s == pytest.approx(
        times.rollout_s + times.teacher_s + times.learner_s + times.other_s, abs=1e-9
    )
    # one after the other: each pool busy in its own phase, never two at once
    assert times.rollout_busy_s == pytest.approx(times.rollout_s, abs=1e-3)
    assert times.learner_busy_s == pytest.approx(times.learner_s, abs=1e-3)
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
    # the teacher beside the rollouts
    assert streamed.overlap_s == pytest.approx(streamed.teacher_overlap_s, abs=1e-3)
    assert streamed.rollout_busy_s == pytest.approx(streamed.rollout_s, abs=1e-3)
    synchronous = run_step(
        4, TASKS, settings(False), FakeController(), SlowPool(), SlowTeacher(), FakeLearner(), 0.0
    ).metrics.times
    assert synchronous.teacher_busy_s is not None and synchronous.teacher_busy_s >= 0.1
    assert synchronous.teacher_overlap_s == 0.0 and synchronous.teacher_s >= 0.1


class EnvController(FakeController):
    """A controller per env: household probes at depth 8 with alpha 1, search plays 3 turns at alpha 0."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, int, str | None]] = []

    def plan(self, step, lag=0, env=None):
        self.calls.append(("plan", step, env))
        probe = env == "alfworld"
        return StepPlan(
            step=step,
            probe=probe,
            h_roll=8 if probe else 3,
            h_hat=3,
            alpha=1.0 if probe else 0.0,
            weights_version=step - 1,
        )

    def ingest(self, step, stats, lag=0, env=None):
        self.calls.append(("ingest", step, env))
        self.ingested.append((step, stats))
        return StepDecision(
            step=step,
            probe=env == "alfworld",
            h_roll=3,
            h_hat=3,
            h_bar=4.5 if env == "alfworld" else 2.0,
            h_eff=1,
            h_cov=2,
            h_ctrl=2,
        )


class DepthPool(FakePool):
    """Records the depth of each task."""

    def play(self, tasks, h_roll, temperature, weights_version, on_result=None):
        self.depths = list(h_roll)
        return super().play(tasks, h_roll, temperature, weights_version, on_result)


def test_a_multi_source_step_plans_scores_weighs_and_ingests_each_source_on_its_own():
    mixed = settings().model_copy(
        update={
            "sources": TurnOPDSettings.model_validate(
                {
                    "sources": [
                        {
                            "env": "alfworld",
                            "share": 0.75,
                            "teacher": "teacher-novel",
                            "blend": {"min_floor": 1},
                        },
                        {
                            "env": "search",
                            "share": 0.25,
                            "teacher": "teacher-search",
                            "blend": {"min_floor": 1},
                        },
                    ]
                }
            ).sources
        }
    )
    # a, c are household trajectories; d plays search
    trajectories = [
        t.model_copy(update={"env": "search"}) if t.episode_id == "d" else t for t in TRAJECTORIES
    ]
    tasks = [EpisodeTask(env=e, split="train", seed=i) for i, e in enumerate(["alfworld"] * 3 + ["search"])]
    controller, pool, learner = EnvController(), DepthPool(trajectories), FakeLearner()
    household, search = FakeTeacher(), FakeTeacher(max_context=700)
    out = run_step(4, tasks, mixed, controller, pool, {"alfworld": household, "search": search}, learner, 0.0)

    assert pool.depths == [8, 8, 8, 3]  # each task at its source's depth
    assert [t.max_tokens for t in pool.tasks] == [8192, 8192, 8192, 700]  # and its own teacher's limit
    assert household.requests == [[3, 1]] and search.requests == [[3]]
    (batch,) = learner.batches
    a, c, d = batch.samples
    assert sum(a.token_weights) + sum(c.token_weights) == pytest.approx(0.75)
    assert d.token_weights == pytest.approx([0.25 / 3] * 3)  # search at trajectory level, its share
    assert [call for call in controller.calls if call[0] == "ingest"] == [
        ("ingest", 4, "alfworld"),
        ("ingest", 4, "search"),
    ]
    (_, household_stats), (_, search_stats) = controller.ingested
    assert household_stats is not None and household_stats.survivors == [2, 1] and search_stats is None
    assert [d.env for d in out.decisions] == ["alfworld", "search"]
    assert [(r.env, len(r.trajectories), r.probe) for r in out.turn_stats] == [
        ("alfworld", 2, True),
        ("search", 1, False),
    ]
    sources = out.metrics.sources
    assert sources is not None and [(s.env, s.h_roll, s.h_bar, s.trajectories) for s in sources] == [
        ("alfworld", 8, 4.5, 2),  # b, without a response, is alfworld's failed episode
        ("search", 3, 2.0, 1),
    ]
    assert [s.failed_episodes for s in sources] == [1, 0]
    assert out.metrics.model_dump()["sources"][1]["env"] == "search"
    assert (
        "sources"
        not in run_step(
            4, TASKS, settings(), FakeController(), FakePool(), FakeTeacher(), FakeLearner(), 0.0
        ).metrics.model_dump()
    )


def test_every_task_plays_within_its_teachers_limit_as_the_teacher_reports_it_each_step():
    teacher, pool = FakeTeacher(max_context=600), FakePool()
    run_step(4, TASKS, settings(), FakeController(), pool, teacher, FakeLearner(), 0.0)
    assert [t.max_tokens for t in pool.tasks] == [600] * 4
    teacher.context = teacher.context.model_copy(update={"token_budget": 300})  # restarted lower
    pool = FakePool()
    run_step(4, TASKS, settings(), FakeController(), pool, teacher, FakeLearner(), 0.0)
    assert [t.max_tokens for t in pool.tasks] == [300] * 4
    assert [t.model_copy(update={"max_tokens": None}) for t in pool.tasks] == TASKS


class RestartedTeacher(FakeTeacher):
    """Reported 8192 tokens when the step began; a restart since left it 6."""

    async def limits(self):
        return self.context.model_copy(update={"max_context": 8192})


@pytest.mark.parametrize("teacher_kind", [FakeTeacher, RestartedTeacher])
@pytest.mark.parametrize("stream", [False, True])
def test_a_trajectory_its_teacher_cannot_score_is_dropped_counted_and_logged_once(
    teacher_kind, stream, caplog
):
    """a (7 tokens to score) exceeds the teacher's 6: the step trains on c and d alone, never on a
    zero score, and counts a as failed with its reason; b has no response at all."""
    controller, learner = FakeController(), FakeLearner()
    with caplog.at_level("WARNING", logger="services.orchestrator.step"):
        out = run_step(4, TASKS, settings(stream), controller, FakePool(), teacher_kind(6), learner, 0.0)
    (batch,) = learner.batches
    assert [s.positions for s in batch.samples] == [[1], [2, 3, 4]]  # c and d
    assert sum(w for s in batch.samples for w in s.token_weights) == pytest.approx(1.0)
    m = out.metrics
    assert (m.trajectories, m.failed_episodes, m.failure_reasons) == (2, 2, {"no_response": 1, "too_long": 1})
    assert m.tokens == 4 and m.success_rate == 0.0  # a, the won episode, is not trained on
    ((_, stats),) = controller.ingested
    assert stats is not None and stats.survivors == [2]  # the controller sees c and d only (a turn each)
    dropped = [r.getMessage() for r in caplog.records if "dropped episode" in r.getMessage()]
    assert len(dropped) == 2
    assert "dropped episode a (too_long): 7 tokens to score exceed the teacher's context of 6" in dropped[0]
    assert "'seed': 0" in dropped[0] and "dropped episode b (no_response)" in dropped[1]


def test_a_step_whose_every_trajectory_is_dropped_stops_the_run_naming_why():
    a, b, _, d = TRAJECTORIES
    message = (
        r"step 4: all 3 episodes failed or were dropped \(2 too_long, 1 no_response\); "
        r"e\.g\. 7 tokens to score exceed the teacher's context of 4"
    )
    with pytest.raises(NoTrajectoriesError, match=message):
        run_step(
            4, TASKS[:3], settings(), FakeController(), FakePool([a, b, d]), FakeTeacher(4), FakeLearner(), 0
        )


class LossyPool(FakePool):
    """Plays the four trajectories of tasks 0..3; tasks 4 and 5 come back lost by the system."""

    def play(self, tasks, h_roll, temperature, weights_version, on_result=None):
        self.tasks = tasks
        lost = [
            EpisodeFailure(
                task=tasks[4], error="env worker died", worker="rollout-worker-0", reason="env_lost"
            ),
            EpisodeFailure(
                task=tasks[5], error="actor died", worker="rollout-worker-1", reason="worker_lost"
            ),
        ]
        return self.result(self.trajectories).model_copy(
            update={"failures": lost, "task_indices": [0, 1, 2, 3]}
        )


SIX_TASKS = [EpisodeTask(env="alfworld", split="train", seed=i) for i in range(6)]


def test_a_step_that_lost_more_than_its_share_of_episodes_to_the_system_stops_the_run():
    strict = settings().model_copy(
        update={"rollout": settings().rollout.model_copy(update={"max_infra_failure_frac": 0.25})}
    )
    message = (
        r"step 4: 2 of 6 episodes failed for the system's reasons \(1 env_lost, 1 worker_lost\), more than "
        r"\[rollout\] max_infra_failure_frac = 0\.25 of them; e\.g\. env worker died"
    )
    learner = FakeLearner()
    with pytest.raises(InfraFailuresError, match=message):
        run_step(4, SIX_TASKS, strict, FakeController(), LossyPool(), FakeTeacher(), learner, 0.0)
    assert learner.batches == []  # nothing trained on the rest
    lenient = strict.model_copy(
        update={"rollout": strict.rollout.model_copy(update={"max_infra_failure_frac": 0.5})}
    )
    out = run_step(4, SIX_TASKS, lenient, FakeController(), LossyPool(), FakeTeacher(), FakeLearner(), 0.0)
    assert out.metrics.failure_reasons == {"env_lost": 1, "worker_lost": 1, "no_response": 1}
    assert out.metrics.trajectories == 3  # a, c, d (b has no response)
