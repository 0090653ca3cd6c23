"""The driver's step loop at ``[pipeline] max_staleness`` >= 1 (and its s = 0 schedule) over fake services
and the real controller service: which weights each step plays, when versions are published and
evaluated, what is logged."""

import asyncio
import threading
import time

import pytest
from step_fakes import TOP_K, FakeLearner, FakePool, FakeTeacher, MemoryStore, step_loop

from services.contracts.controller import ProbeStats
from services.contracts.rollout import EpisodeTask
from services.controller.actor import ControllerService
from services.controller.replay import replay
from services.orchestrator.probe_stats import probe_stats
from services.orchestrator.step import NoTrajectoriesError
from services.orchestrator.step_loop import no_boundary
from services.settings.tree import TurnOPDSettings


def settings(steps=6, staleness=1, stream=False):
    return TurnOPDSettings.model_validate(
        {
            "distill": {"distill_topk": TOP_K},
            "blend": {"min_floor": 1},
            "optim": {"steps": steps},
            "eval": {"interval": 3},
            "depth": {"max": 6, "min": 1, "warmup_steps": 1, "probe_interval": 2, "min_cov_traj": 1},
            "pipeline": {"max_staleness": staleness, "stream_teacher": stream},
        }
    )


def tasks_of(j):
    return [EpisodeTask(env="alfworld", split="train", seed=100 * j + i) for i in range(4)]


class LanePool(FakePool):
    """Plays only the weights it holds and never during a publish; logs both, in order."""

    def __init__(self, events, version=0, slow=None, empty_at=None):
        super().__init__()
        self.events, self.weights_version, self.slow, self.empty_at = events, version, slow or {}, empty_at
        self.playing = threading.Lock()

    def play(self, tasks, h_roll, temperature, weights_version, on_result=None):
        step = tasks[0].seed // 100
        assert weights_version == self.weights_version, (step, weights_version, self.weights_version)
        with self.playing:
            self.events.append(("play", step, weights_version))
            hold = self.slow.get(step, 0.0)
            if isinstance(hold, threading.Event):  # plays until the test lets it finish
                assert hold.wait(timeout=30)
            else:
                time.sleep(hold)
            if step == self.empty_at:
                return self.result([])
            self.trajectories = [
                t.model_copy(update={"weights_version": weights_version}) for t in self.trajectories
            ]
            out = super().play(tasks, h_roll, temperature, weights_version, on_result)
            self.events.append(("played", step, weights_version))
            return out

    def publish_weights(self, weights_ref, version, rewind=False):
        assert self.playing.acquire(blocking=False), "published during a play"
        try:
            super().publish_weights(weights_ref, version, rewind)
        finally:
            self.playing.release()


class LaneLearner(FakeLearner):
    def __init__(self, events, seconds=0.0, fail_at=None):
        super().__init__()
        self.events, self.seconds, self.fail_at = events, seconds, fail_at

    def step(self, batch):
        if batch.step == self.fail_at:
            raise RuntimeError(f"learner broke at step {batch.step}")
        time.sleep(self.seconds)
        out = super().step(batch)
        self.events.append(("learned", batch.step, None))
        return out


def lanes_over(s, pool, start=0, controller=None, evals=None):
    controller = controller or ControllerService(s.for_controller(), "r", MemoryStore())

    def evaluate(step, cumulative_s):
        evals.append((step, pool.weights_version, cumulative_s))

    return controller, step_loop(s, start, controller, pool, FakeTeacher(), tasks_of, evaluate)


def drive(lanes, learner, cumulative_s, record, boundary=no_boundary):
    asyncio.run(lanes.run(learner, cumulative_s, record, boundary))


@pytest.mark.parametrize("stream", [False, True])
def test_staleness_1_plays_step_j_with_version_j_minus_2_and_logs_every_step_in_order(stream):
    events, evals, outcomes = [], [], []
    s = settings(stream=stream)
    pool, learner = LanePool(events), LaneLearner(events)
    controller, lanes = lanes_over(s, pool, evals=evals)
    drive(lanes, learner, 10.0, outcomes.append)

    assert [(j, v) for kind, j, v in events if kind == "play"] == [
        (1, 0),
        (2, 0),
        (3, 1),
        (4, 2),
        (5, 3),
        (6, 4),
    ]
    assert pool.published == [(f"weights-{v}", v) for v in range(1, 7)]  # each version once, in order
    assert [b.step for b in learner.batches] == [1, 2, 3, 4, 5, 6]
    metrics = [o.metrics for o in outcomes]
    assert [m.step for m in metrics] == [1, 2, 3, 4, 5, 6] and [m.weights_version for m in metrics] == list(
        range(1, 7)
    )
    assert [m.rollout_weights_version for m in metrics] == [0, 0, 1, 2, 3, 4]
    assert [m.weights_lag for m in metrics] == [0, 1, 1, 1, 1, 1]
    assert metrics[-1].cumulative_s == pytest.approx(10.0 + sum(m.times.total_s for m in metrics))
    for m in metrics:
        t = m.times
        assert t.total_s == pytest.approx(t.rollout_s + t.teacher_s + t.learner_s + t.other_s)
        assert None not in (t.rollout_busy_s, t.teacher_busy_s, t.learner_busy_s, t.overlap_s)
    # the evaluations after steps 3 and 6 ran on exactly those weights, with the wall time up to them
    assert [(step, held) for step, held, _ in evals] == [(3, 3), (6, 6)]
    assert evals[0][2] == pytest.approx(metrics[2].cumulative_s)
    # the controller: each plan from the state after step k-2, as a replay with lag 1 finds it
    decisions = [o.decision for o in outcomes]
    assert [d.planned_from for d in decisions] == [0, 0, 1, 2, 3, 4]
    assert [o.plan.h_hat for o in outcomes] == [d.h_hat for d in decisions]
    probes = {o.metrics.step: probe_stats(o.result.turn_stats) for o in outcomes if o.plan.probe}
    assert decisions == list(replay(probes, 6, s.depth, lag=1))
    assert decisions == controller.decisions()


def test_the_rollouts_of_step_k_plus_1_play_while_the_learner_trains_step_k():
    events, outcomes = [], []
    pool = LanePool(events, slow={j: 0.15 for j in range(1, 7)})
    _, lanes = lanes_over(settings(steps=4, staleness=1), pool, evals=[])
    drive(lanes, LaneLearner(events, seconds=0.6), 0.0, outcomes.append)
    assert events.index(("play", 2, 0)) < events.index(("learned", 1, None))
    assert events.index(("play", 3, 1)) < events.index(("learned", 2, None))
    for m in (o.metrics for o in outcomes[1:3]):
        assert m.times.overlap_s > 0.05  # step k+1's rollouts beside step k's update
        assert m.times.learner_busy_s >= 0.55 and m.times.rollout_busy_s > 0.05
    assert outcomes[3].metrics.times.rollout_busy_s < 0.05  # nothing left to play beside the last step


def test_staleness_2_lets_the_rollouts_run_two_versions_ahead():
    events, outcomes = [], []
    pool = LanePool(events)
    _, lanes = lanes_over(settings(steps=5, staleness=2), pool, evals=[])
    drive(lanes, LaneLearner(events), 0.0, outcomes.append)
    assert [(j, v) for kind, j, v in events if kind == "play"] == [(1, 0), (2, 0), (3, 0), (4, 1), (5, 2)]
    assert [o.decision.planned_from for o in outcomes] == [0, 0, 0, 1, 2]
    assert [o.metrics.weights_lag for o in outcomes] == [0, 1, 2, 2, 2]


def test_a_resumed_run_plays_the_first_steps_with_the_checkpoints_weights():
    s = settings(steps=6)
    controller = ControllerService(s.for_controller(), "r", MemoryStore())
    for k in (1, 2, 3):  # steps 1..3 done before the run stopped; the checkpoint holds weights 3
        stats = ProbeStats(step=k, kl_per_turn=[0.5, 0.25], survivors=[3, 1], success_turns=[1])
        controller.ingest(k, stats if controller.plan(k, lag=1).probe else None, lag=1)
    before = [controller.plan(k, lag=1) for k in (4, 5)]
    controller.rewind(3)
    events, outcomes = [], []
    pool = LanePool(events, version=3)
    _, lanes = lanes_over(s, pool, start=3, controller=controller, evals=[])
    drive(lanes, LaneLearner(events), 30.0, outcomes.append)
    assert [(j, v) for kind, j, v in events if kind == "play"] == [(4, 3), (5, 3), (6, 4)]
    assert [o.metrics.weights_lag for o in outcomes] == [0, 1, 1]  # below the bound, never above
    assert [o.plan.h_hat for o in outcomes[:2]] == [p.h_hat for p in before]  # the same plans as before
    assert [o.decision.planned_from for o in outcomes] == [2, 3, 4]
    assert pool.published == [("weights-4", 4), ("weights-5", 5), ("weights-6", 6)]


def test_weights_not_yet_published_are_copied_before_a_learner_closes():
    events, outcomes = [], []
    step_3_may_end = threading.Event()
    pool = LanePool(events, slow={3: step_3_may_end})
    _, lanes = lanes_over(settings(steps=4), pool, evals=[])

    def on_step(outcome):
        outcomes.append(outcome)
        if outcome.metrics.step == 2:  # step 3 still plays: version 2 is not published yet
            lanes.own_weights()
            step_3_may_end.set()

    drive(lanes, LaneLearner(events), 0.0, on_step)
    assert pool.published == [("weights-1", 1), ("own-weights-2", 2), ("weights-3", 3), ("weights-4", 4)]


def test_a_failed_rollout_stops_the_learner_lane_after_the_steps_before_it():
    outcomes = []
    _, lanes = lanes_over(settings(), LanePool([], empty_at=3), evals=[])
    with pytest.raises(NoTrajectoriesError, match="step 3: all 4 episodes failed"):
        drive(lanes, LaneLearner([]), 0.0, outcomes.append)
    assert [o.metrics.step for o in outcomes] == [1, 2]


def test_a_batch_handed_over_before_the_rollout_lane_failed_is_still_learned():
    """The race a clean clone once lost: step 3's rollout fails before the learner lane has taken
    step 2's batch (here: step 1's boundary waits for the failure). Step 2 was played in full, so
    it is learned; only then does the failure stop the run."""
    outcomes, waited = [], []
    _, lanes = lanes_over(settings(), LanePool([], empty_at=3), evals=[])

    async def boundary(step):
        deadline = time.monotonic() + 10
        while step == 1 and lanes._failure is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        waited.append((step, lanes._failure is not None))

    with pytest.raises(NoTrajectoriesError, match="step 3: all 4 episodes failed"):
        drive(lanes, LaneLearner([]), 0.0, outcomes.append, boundary)
    assert waited[0] == (1, True)  # step 3 had failed before step 2's batch was taken
    assert [o.metrics.step for o in outcomes] == [1, 2]


def test_a_failed_update_stops_the_rollout_lane():
    _, lanes = lanes_over(settings(), LanePool([]), evals=[])
    with pytest.raises(RuntimeError, match="learner broke at step 2"):
        drive(lanes, LaneLearner([], fail_at=2), 0.0, lambda outcome: None)
    assert lanes.rollout_lane is not None and lanes.rollout_lane.done()


def test_staleness_0_is_the_synchronous_step_on_the_same_loop():
    """Each step plays with the weights of the step before, after that step is learned and ingested;
    the evaluation between steps runs on exactly the weights it names and is not the next step's time."""
    events, evals, outcomes = [], [], []
    s = settings(staleness=0)
    pool, learner = LanePool(events), LaneLearner(events)
    controller = ControllerService(s.for_controller(), "r", MemoryStore())

    def evaluate(step, cumulative_s):
        time.sleep(0.5)
        evals.append((step, pool.weights_version, cumulative_s))

    lanes = step_loop(s, 0, controller, pool, FakeTeacher(), tasks_of, evaluate)
    drive(lanes, learner, 0.0, outcomes.append)
    assert [(j, v) for kind, j, v in events if kind == "play"] == [(j, j - 1) for j in range(1, 7)]
    for j in range(1, 6):  # strictly one after the other
        assert events.index(("learned", j, None)) < events.index(("play", j + 1, j))
    assert pool.published == [(f"weights-{v}", v) for v in range(1, 7)]
    assert [(step, held) for step, held, _ in evals] == [(3, 3), (6, 6)]
    metrics = [o.metrics for o in outcomes]
    assert [m.weights_lag for m in metrics] == [0] * 6
    assert metrics[3].times.total_s < 0.25  # step 4 waited out the 0.5 s evaluation after step 3
    assert evals[0][2] == pytest.approx(metrics[2].cumulative_s)
    decisions = [o.decision for o in outcomes]
    probes = {o.metrics.step: probe_stats(o.result.turn_stats) for o in outcomes if o.plan.probe}
    assert decisions == list(replay(probes, 6, s.depth, lag=0)) == controller.decisions()


def test_a_failed_update_returns_only_once_the_play_it_abandoned_has_ended():
    """The pool takes one play at a time: a run that goes on after a lost learner must find it idle."""
    events = []
    pool = LanePool(events, slow={3: 0.5})
    _, lanes = lanes_over(settings(steps=4), pool, evals=[])

    class LostLearner(LaneLearner):
        def step(self, batch):
            if batch.step == 2:
                time.sleep(0.2)  # step 3 begins to play beside it
            return super().step(batch)

    learner = LostLearner(events, fail_at=2)
    with pytest.raises(RuntimeError, match="learner broke at step 2"):
        drive(lanes, learner, 0.0, lambda outcome: None)
    assert ("played", 3, 1) in events  # step 3's play (beside step 2's update) ran to its end first
    assert isinstance(lanes.learner_failure, RuntimeError)  # the update failed, not the rollouts
