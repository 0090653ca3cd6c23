"""The driver's step loop: one asyncio loop, one step path for every ``[pipeline] max_staleness``.

Two lanes meet through one queue of played batches:

- the rollout lane, for each step j in turn: waits until the learner lane has finished step
  j-1-s (so the plan's basis is ingested and those weights exist), publishes each version up to
  max(j-1-s, start) to the pool (evaluating where one is due, ``EvalSchedule``), plans step j
  (``Planner``), plays and scores it (``Dispatcher``) and puts its batch on the queue;
- the learner lane takes the batches in step order, runs the update, ingests the statistics
  (controller state after exactly step k), records the step and then reaches the step boundary
  (where a learner restart happens).

At s = 0 the rollout lane cannot start step k+1 before step k is ingested: the steps run one
after the other, the synchronous step. At s >= 1 the rollouts and teacher scoring of steps
k+1..k+s run while the learner trains step k, with weights at most s versions old. Either way
the pool never gets a publish during a play, each version is published once and in turn, every
trajectory of step j is played with exactly its plan's version, and each step is logged in
order, once.

A failure of the rollout lane is queued behind the batches it handed over: the learner lane
learns every step played in full, then raises it. A failure of the learner lane cancels the
rollout lane, and ``run`` returns (raising it) once the pool's call in flight has ended, so the
pool is idle for whatever the run does next (a learner recovery plays on it).

Resume: only the checkpoint's weights (``start``) exist, so steps start+1..start+s are played with
version ``start`` (lag below s). A replaced learner resumes with exactly the weights and
optimizer state of the step it replaced, so the batches already played stay valid.
"""

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from services.blocking import blocking
from services.contracts.controller import StepPlan
from services.contracts.learner import LearnerBatch
from services.contracts.rollout import EpisodeTask
from services.controller.depth import plan_basis_step
from services.orchestrator.busy_time import Interval
from services.orchestrator.dispatcher import Dispatcher
from services.orchestrator.planner import Planner
from services.orchestrator.run_plan import LoopSettings
from services.orchestrator.source_mix import SourceBatch, mixed_learner_batch
from services.orchestrator.step import LearnerLike, Played, StepOutcome, step_metrics, step_times


async def no_boundary(step: int) -> None:
    """A step boundary with nothing to do there."""


@dataclass(frozen=True)
class PlayedStep:
    """What the rollout lane hands the learner lane for step k: each source's plan and part."""

    plans: list[StepPlan]
    played: Played
    parts: list[SourceBatch]
    batch: LearnerBatch
    ready: float  # when the batch was ready for the learner


@dataclass(frozen=True)
class LaneFailed:
    """The rollout lane's failure, queued behind the batches it handed over."""

    error: BaseException


class StepLoop:
    """Steps ``start+1..steps``; ``run`` drives them on the running event loop.

    ``tasks_of(j)``: step j's tasks; ``evaluate(step, cumulative_s)``: the evaluation due after
    ``step``, on the weights the pool holds (blocking: it runs off the loop); ``copy_weights(ref)``:
    weights this process owns (for ``own_weights``).
    """

    def __init__(
        self,
        plan: LoopSettings,
        start: int,
        planner: Planner,
        dispatcher: Dispatcher,
        tasks_of: Callable[[int], list[EpisodeTask]],
        evaluate: Callable[[int, float], None],
        copy_weights: Callable[[Any], Any],
    ) -> None:
        self.plan = plan
        self.start = start
        self.planner = planner
        self.dispatcher = dispatcher
        self.tasks_of = tasks_of
        self.evaluate = evaluate
        self.copy_weights = copy_weights
        self.activity = dispatcher.activity
        self._publishing = threading.Lock()  # a publish, or a copy of the weights it could publish
        self._weights: dict[int, Any] = {}  # version -> ObjectRef, made and not yet published
        self._cumulative = {start: 0.0}  # step -> the steps' summed wall time after it
        self._evaluations: list[Interval] = []
        self._done = start  # the last step the learner lane finished (updated, ingested, recorded)
        self._finished = asyncio.Condition()  # bound to the loop that first waits on it
        self._failure: BaseException | None = None
        self.learner_failure: BaseException | None = None  # what an update raised (the learner lost?)
        self.rollout_lane: asyncio.Task[None] | None = None

    async def run(
        self,
        learner: LearnerLike,
        cumulative_s: float,
        record: Callable[[StepOutcome], None],
        boundary: Callable[[int], Awaitable[None]] = no_boundary,
    ) -> None:
        """Train every step in order. ``record(outcome)`` logs a step (it blocks: it runs off the
        loop); ``boundary(k)`` is awaited after step k is recorded (a learner restart; ``learner``
        then reaches the new one)."""
        self._cumulative[self.start] = cumulative_s
        batches: asyncio.Queue[PlayedStep | LaneFailed] = asyncio.Queue(maxsize=max(1, self.plan.staleness))
        self.rollout_lane = asyncio.create_task(self._roll(batches), name="rollout-lane")
        try:
            for k in range(self.start + 1, self.plan.steps + 1):
                outcome = await self._learn(k, learner, batches)
                await blocking(record, outcome)
                async with self._finished:
                    self._done = k
                    self._finished.notify_all()
                await boundary(k)
            await self.rollout_lane
            if self._failure is not None:
                raise self._failure
        except asyncio.CancelledError:  # Ctrl-C: stop now, the services' shutdown ends their calls
            self.rollout_lane.cancel()
            raise
        except BaseException:
            self.rollout_lane.cancel()
            await asyncio.gather(self.rollout_lane, return_exceptions=True)
            await self.dispatcher.calls.drain()  # the pool idle again: whatever comes next may use it
            raise

    def own_weights(self) -> None:
        """Copy the versions not yet published into objects this process owns (before a learner
        closes; from any thread but the loop's)."""
        with self._publishing:
            held = dict(self._weights)
            self._weights.update({version: self.copy_weights(ref) for version, ref in held.items()})

    async def _learn(
        self, k: int, learner: LearnerLike, batches: "asyncio.Queue[PlayedStep | LaneFailed]"
    ) -> StepOutcome:
        waiting = time.perf_counter()
        item = await batches.get()
        if isinstance(item, LaneFailed):
            raise item.error
        took = time.perf_counter()
        with self.activity.busy("learner"):
            try:
                result, weights_ref = await blocking(learner.step, item.batch)
            except Exception as exc:
                self.learner_failure = exc
                raise
        learned = time.perf_counter()
        records = self.planner.sources.turn_stats(result.turn_stats, item.parts)
        decisions = await self.planner.ingest(k, item.parts, records)
        done = time.perf_counter()
        busy, shared = self.activity.within((waiting, done))
        times = step_times(
            (waiting, done), took, learned, item.played, item.ready, busy, shared, self._evaluations,
        )  # fmt: skip
        metrics = step_metrics(
            self.plan.method,
            self.plan.multi_source,
            item.parts,
            decisions,
            result,
            item.played.rollout,
            times,
            self._cumulative[k - 1],
        )
        with self._publishing:
            self._weights[k] = weights_ref
        self._cumulative[k] = metrics.cumulative_s
        return StepOutcome(
            plan=item.plans[0], decision=decisions[0], result=result, metrics=metrics,
            decisions=tuple(decisions), turn_stats=tuple(records),
        )  # fmt: skip

    async def _roll(self, batches: "asyncio.Queue[PlayedStep | LaneFailed]") -> None:
        try:
            for j in range(self.start + 1, self.plan.steps + 1):
                basis = plan_basis_step(j, self.plan.staleness)
                await self._wait_done(basis)
                version = max(basis, self.start)
                await self._publish_through(version)
                await batches.put(await self._play(j, await self.planner.plans(j, version)))
            await self._publish_through(self.plan.steps)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the learner lane raises it after the batches before it
            self._failure = exc
            await batches.put(LaneFailed(exc))

    async def _play(self, j: int, plans: Sequence[StepPlan]) -> PlayedStep:
        tasks = self.tasks_of(j)
        depths = self.planner.sources.depths(plans, tasks)
        played = await self.dispatcher.play(j, tasks, depths, plans[0].weights_version)
        parts = self.planner.sources.parts(plans, played.supervised, played.scores)
        batch = mixed_learner_batch(j, parts)
        return PlayedStep(list(plans), played, parts, batch, time.perf_counter())

    async def _publish_through(self, version: int) -> None:
        """Publish each version after the pool's up to ``version``, evaluating where one is due."""
        for v in range(self.dispatcher.weights_version + 1, version + 1):
            await self._wait_done(v)
            await self.dispatcher.calls.call(self._publish, v)
            if self.plan.evals.due(v):
                began = time.perf_counter()
                with self.activity.busy("rollout"):
                    await self.dispatcher.calls.call(self.evaluate, v, self._cumulative[v])
                self._evaluations.append((began, time.perf_counter()))

    def _publish(self, version: int) -> None:
        with self._publishing:
            ref = self._weights[version]
            for old in [v for v in self._weights if v <= version]:
                del self._weights[old]
            self.dispatcher.pool.publish_weights(ref, version)

    async def _wait_done(self, step: int) -> None:
        async with self._finished:
            await self._finished.wait_for(lambda: self._done >= step)
