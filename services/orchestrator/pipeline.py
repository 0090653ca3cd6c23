"""`turnopd train`: the step loop over the services of ``stack.py``, with logs, metrics and evaluation.

``[pipeline] max_staleness`` = 0 (the default) runs one synchronous step after the other
(``step.run_step``), evaluating between steps. s >= 1 overlaps them (``OverlappedSteps``): the
rollouts and teacher scoring of steps k+1..k+s run while the learner trains step k, with weights
at most s versions old; each step is still logged in order, once.
"""

import queue
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import ray
from prometheus_client import CollectorRegistry

from services.contracts.controller import StepPlan
from services.contracts.learner import LearnerBatch
from services.contracts.operations import RunPhase
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.contracts.rollout import EpisodeTask
from services.controller.depth import plan_basis_step
from services.diagnostics.step_stats import step_stats
from services.errors import TurnOPDError
from services.learner.checkpoint import checkpoint_dir, drop_checkpoints_after, prune_checkpoints
from services.operations.controller_rebuilds import RebuildNotices
from services.operations.live_status import LiveRun
from services.operations.restart_loop import RestartLoop
from services.operations.restarts import ServiceRestarts
from services.operations.run_control import start_run_control, stop_run_control
from services.operations.stack import Stack, connect_ray, start_stack
from services.orchestrator.busy_time import PoolActivity
from services.orchestrator.evaluation import evaluate
from services.orchestrator.metrics_exporter import MetricsExporter
from services.orchestrator.resume_checks import check_before_drop, check_resumed, first_checkpoint_step
from services.orchestrator.source_mix import ControllerLike, SourceBatch, StepSources, mixed_learner_batch
from services.orchestrator.step import (
    LearnerLike,
    Played,
    RolloutPoolLike,
    StepOutcome,
    overlapped_times,
    play_and_score,
    run_step,
    step_metrics,
)
from services.orchestrator.tasks import mixed_step_tasks
from services.orchestrator.teacher_scores import Teachers
from services.orchestrator.training_metrics import TrainingMetrics
from services.run_dir import DECISIONS_FILE, EVAL_FILE, METRICS_FILE, TURN_STATS_FILE, RunDir
from services.settings.tree import TurnOPDSettings

T = TypeVar("T")
StepCallback = Callable[[StepMetrics], None]
EvalCallback = Callable[[EvalRecord], None]


def _cumulative_before(run: RunDir) -> float:
    rows = run.records(METRICS_FILE)
    return float(rows[-1]["cumulative_s"]) if rows else 0.0


def _resume(stack: Stack, run: RunDir, last_logged: int, first_checkpoint: int) -> int:
    """Line the run up with the checkpoint the learner resumed from: logs, controller and rollout
    weights (refused where that would erase checkpointed steps: ``check_resumed``)."""
    start = stack.learner.resumed_step
    check_resumed(run.root, start, last_logged, first_checkpoint)
    run.truncate_after(start)
    for key in StepSources.of(stack.settings).keys:  # every source's controller
        stack.controller.rewind(start, key)
    if start > 0:
        from safetensors.torch import load_file

        weights = load_file(checkpoint_dir(run.root, start) / "model.safetensors")
        stack.pool.publish_weights(ray.put(weights), start)
    return start


def _eval_size(settings: TurnOPDSettings) -> str:
    e = settings.eval
    games = ", ".join(
        f"{e.episodes} {s.eval_split}" + (f" {s.env}" if settings.sources else "")
        for s in settings.task_sources()
    )
    return f"{games} episodes x {e.val_n}, temperature {e.val_temperature:g}"


def eval_due(settings: TurnOPDSettings, step: int) -> bool:
    """Whether the schedule evaluates after ``step`` (step 0: before training, if ``eval.at_start``)."""
    if step == 0:
        return settings.eval.at_start
    return step % settings.eval.interval == 0 or step == settings.optim.steps


class LaneStopped(TurnOPDError, RuntimeError):
    """The other lane failed, or the run is stopping: this lane gives up its wait."""


@dataclass(frozen=True)
class PlayedStep:
    """What the rollout lane hands the learner lane for step k: each source's plan and part."""

    plans: list[StepPlan]
    played: Played
    parts: list[SourceBatch]
    batch: LearnerBatch
    started: float  # perf_counter when the pool began playing the step
    ready: float  # when the batch was ready for the learner


class OverlappedSteps:
    """Steps ``start+1..optim.steps`` with staleness s = ``[pipeline] max_staleness`` >= 1, in two lanes.

    The rollout lane (a thread of its own) plans, plays and scores step j and hands its batch over;
    before step j it waits until the learner lane has finished step j-1-s (so the plan's basis is
    ingested and those weights exist) and publishes version max(j-1-s, start) to the pool. It never
    publishes during a play, and publishes each version in turn, so every trajectory of step j is
    played with exactly that version and the pool's versions only increase. Where it publishes
    version v it also runs the evaluation due after step v (``evaluate``); after the last step it
    publishes the remaining versions up to the last one.

    The learner lane (the caller's thread, ``run``) takes the batches in step order, runs the
    update, ingests the probe statistics (controller state after exactly step k) and calls
    ``on_step`` with the step's outcome; a learner restart happens there, between steps.

    Resume: only the checkpoint's weights (``start``) exist, so steps start+1..start+s are played
    with version ``start`` (lag below s). A replaced learner resumes with exactly the weights and
    optimizer state of the step it replaced, so the batches already played stay valid.
    """

    def __init__(
        self,
        settings: TurnOPDSettings,
        start: int,
        controller: ControllerLike,
        pool: RolloutPoolLike,
        teacher: Teachers,
        tasks_of: Callable[[int], list[EpisodeTask]],
        evaluate: Callable[[int, float], None],
        copy_weights: Callable[[Any], Any],
    ) -> None:
        self.settings = settings
        self.staleness = settings.pipeline.max_staleness
        self.start, self.last = start, settings.optim.steps
        self.controller, self.pool, self.teacher = controller, pool, teacher
        self.sources = StepSources.of(settings)
        self.tasks_of, self.evaluate, self.copy_weights = tasks_of, evaluate, copy_weights
        self.activity = PoolActivity()
        self._changed = threading.Condition()
        self._publishing = threading.Lock()  # a publish, or a copy of the weights it could publish
        self._done = start  # the last step the learner lane finished (updated and ingested)
        self._cumulative = {start: 0.0}  # step -> the steps' summed wall time after it
        self._weights: dict[int, Any] = {}  # version -> ObjectRef, made and not yet published
        self._batches: dict[int, PlayedStep] = {}
        self._failure: BaseException | None = None
        self._stopping = False
        self._thread = threading.Thread(target=self._roll, name="rollout-lane", daemon=True)

    def run(
        self,
        learner_of: Callable[[], LearnerLike],
        cumulative_s: float,
        on_step: Callable[[StepOutcome], None],
    ) -> None:
        """Train every step in order; ``learner_of`` gives the current learner (restarts replace it)."""
        self._cumulative[self.start] = cumulative_s
        self._thread.start()
        try:
            for k in range(self.start + 1, self.last + 1):
                on_step(self._learn(k, learner_of()))
            self._thread.join()
            self._raise_failure()
        finally:
            with self._changed:
                self._stopping = True
                self._changed.notify_all()

    def own_weights(self) -> None:
        """Copy the versions not yet published into objects this process owns (before a learner closes)."""
        with self._publishing:
            with self._changed:
                held = dict(self._weights)
            owned = {version: self.copy_weights(ref) for version, ref in held.items()}
            with self._changed:
                self._weights.update({v: ref for v, ref in owned.items() if v in self._weights})

    def _learn(self, k: int, learner: LearnerLike) -> StepOutcome:
        waiting = time.perf_counter()
        item = self._wait(lambda: self._batches.get(k), ready_first=True)
        took = time.perf_counter()
        with self.activity.busy("learner"):
            result, weights_ref = learner.step(item.batch)
        learned = time.perf_counter()
        records = self.sources.turn_stats(result.turn_stats, item.parts)
        decisions = self.sources.ingest(self.controller, k, item.parts, records, self.staleness)
        done = time.perf_counter()
        busy, shared = self.activity.within((waiting, done))
        times = overlapped_times(
            (waiting, done), took, learned, item.played, item.started, item.ready, busy, shared
        )
        cumulative = self._cumulative[k - 1]
        metrics = step_metrics(
            self.settings, item.parts, decisions, result, item.played.rollout, times, cumulative
        )
        with self._changed:
            del self._batches[k]
            self._weights[k] = weights_ref
            self._cumulative[k] = metrics.cumulative_s
            self._done = k
            self._changed.notify_all()
        return StepOutcome(
            plan=item.plans[0], decision=decisions[0], result=result, metrics=metrics,
            decisions=tuple(decisions), turn_stats=tuple(records),
        )  # fmt: skip

    def _roll(self) -> None:
        try:
            for j in range(self.start + 1, self.last + 1):
                basis = plan_basis_step(j, self.staleness)
                self._wait(partial(self._finished, basis))
                version = max(basis, self.start)
                self._publish_through(version)
                plans = self.sources.plans(self.controller, j, self.staleness)
                self._play(j, [plan.model_copy(update={"weights_version": version}) for plan in plans])
            self._publish_through(self.last)
        except LaneStopped:
            return
        except BaseException as exc:  # handed to the learner lane, which raises it
            with self._changed:
                self._failure = exc
                self._changed.notify_all()

    def _play(self, j: int, plans: list[StepPlan]) -> None:
        started = time.perf_counter()
        tasks = self.tasks_of(j)
        depths = self.sources.depths(plans, tasks)
        played = play_and_score(
            j, tasks, depths, plans[0].weights_version, self.settings, self.pool, self.teacher, self.activity
        )
        parts = self.sources.parts(plans, played.supervised, played.scores)
        batch = mixed_learner_batch(j, parts)
        with self._changed:
            self._batches[j] = PlayedStep(plans, played, parts, batch, started, time.perf_counter())
            self._changed.notify_all()

    def _publish_through(self, version: int) -> None:
        """Publish each version after the pool's up to ``version``, evaluating where one is due."""
        for v in range(self.pool.weights_version + 1, version + 1):
            self._wait(partial(self._finished, v))
            with self._publishing:
                with self._changed:
                    ref = self._weights[v]
                    for old in [u for u in self._weights if u <= v]:
                        del self._weights[old]
                self.pool.publish_weights(ref, v)
            if eval_due(self.settings, v):
                with self.activity.busy("rollout"):
                    self.evaluate(v, self._cumulative[v])

    def _finished(self, step: int) -> bool | None:
        """True once the learner lane has finished ``step`` (None: not yet)."""
        return True if self._done >= step else None

    def _wait(self, ready: Callable[[], T | None], ready_first: bool = False) -> T:
        """Wait until ``ready()`` has a value; LaneStopped (or the other lane's failure) first, unless
        ``ready_first``: the learner lane still takes every batch handed over before the rollout
        lane failed (steps played in full), and only then raises its failure."""
        with self._changed:
            while True:
                value = ready() if ready_first else None
                if value is not None:
                    return value
                self._raise_failure()
                if self._stopping:
                    raise LaneStopped("the run is stopping")
                value = ready()
                if value is not None:
                    return value
                self._changed.wait()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure


def train(
    settings: TurnOPDSettings,
    run: RunDir,
    on_step: StepCallback,
    on_eval: EvalCallback,
    on_phase: Callable[[str], None] = lambda _: None,
) -> int:
    """Run steps after the last checkpoint up to ``optim.steps``; return the last step done.

    ``on_phase``: told, in words, when the run starts a phase (an evaluation the driver waits for,
    training), so a console can say what a long wait is.

    While it runs, the `run-control` actor serves `turnopd status` and `turnopd restart`.
    """
    # A run stopped between the learner's checkpoint and that step's log lines would resume with the
    # step missing from every log: resume from the last step the logs hold instead.
    last_logged = max(run.steps_logged(METRICS_FILE), default=0)
    first_checkpoint = first_checkpoint_step(settings.learner.checkpoint_every, settings.optim.steps)
    check_before_drop(run.root, last_logged, first_checkpoint)
    drop_checkpoints_after(run.root, last_logged)
    with ExitStack() as exits:
        exporter = TrainingMetrics(
            CollectorRegistry(),
            max(source.max_turns for source in settings.task_sources()),
            settings.diagnostics,
            settings.task_sources()[0].env,
        )
        if settings.metrics.enabled:  # first: a port in use or a missing token fails before Ray starts
            m = settings.metrics
            token = settings.security.resolved_service_token()
            exits.enter_context(MetricsExporter(exporter.registry, m.host, m.port, token))
        connect_ray(settings, exits)
        control = start_run_control()
        exits.callback(stop_run_control, control)
        on_phase("starting the services")
        stack = start_stack(settings, run, exits)
        start = _resume(stack, run, last_logged, first_checkpoint)
        rebuilds = RebuildNotices(stack.controller)  # what the controller rebuilt of what Redis lost
        rebuilds.check()
        restarts = ServiceRestarts(stack.services)
        live = LiveRun(stack, restarts, control, start)
        ops = RestartLoop(live, restarts).start()
        exits.callback(ops.stop)
        cumulative = _cumulative_before(run)

        def record_step(out: StepOutcome) -> None:
            for record in out.turn_stats:  # one per source of a multi-environment run
                run.append(TURN_STATS_FILE, record.model_dump_json())
            for decision in out.decisions:
                run.append(DECISIONS_FILE, decision.model_dump_json())
            run.append(METRICS_FILE, out.metrics.model_dump_json())
            # only now may the checkpoint this step replaces go (a crash before the line: it is the resume's)
            prune_checkpoints(run.root, settings.learner.keep_checkpoints, out.metrics.step)
            exporter.observe(
                out.metrics,
                step_stats(out.result.turn_stats, settings.blend.min_floor, settings.blend.min_frac),
                learner=out.result,
            )
            exporter.observe_pool(
                stack.pool.stats, len(stack.pool.live_workers), stack.services.teacher_replicas
            )
            live.step_done(out.metrics)
            rebuilds.check()
            on_step(out.metrics)

        def evaluated(step: int, cumulative_s: float) -> list[EvalRecord]:
            """Evaluate the weights the pool holds (version ``step``) on every source and log it."""
            records = evaluate(
                stack.pool, settings, step=step, weights_version=step, cumulative_s=cumulative_s
            )
            for record in records:
                run.append(EVAL_FILE, record.model_dump_json())
                live.eval_done(record)
            return records

        def phase(state: RunPhase, text: str) -> None:
            """Tell `turnopd status` (``state``) and the console (``text``) what the run does now."""
            live.set_phase(state)
            on_phase(text)

        def evaluate_between_steps(step: int, cumulative_s: float, when: str) -> None:
            """An evaluation the step loop waits for, then back to training."""
            phase("evaluating", f"evaluating the student {when} ({_eval_size(settings)})")
            for record in evaluated(step, cumulative_s):
                on_eval(record)
            phase("training", "training")

        if eval_due(settings, start) and start not in run.steps_logged(EVAL_FILE):
            # A fresh run's start, or a run stopped after its checkpoint but before this evaluation.
            evaluate_between_steps(start, cumulative, f"before step {start + 1}")
        else:
            phase("training", "training")

        sources = settings.task_sources()

        def tasks_of(k: int) -> list[EpisodeTask]:
            return mixed_step_tasks(sources, settings.optim.batch, settings.rollout.n, k, settings.run.seed)

        if settings.pipeline.max_staleness == 0:
            for k in range(start + 1, settings.optim.steps + 1):
                out = run_step(
                    k,
                    tasks_of(k),
                    settings,
                    stack.controller,
                    stack.pool,
                    stack.teacher,
                    stack.learner,
                    cumulative,
                )
                cumulative = out.metrics.cumulative_s
                record_step(out)
                if eval_due(settings, k):
                    evaluate_between_steps(k, cumulative, f"after step {k}")
                ops.at_step_boundary(k)
        else:
            evals: queue.SimpleQueue[list[EvalRecord]] = queue.SimpleQueue()

            def report_evals() -> None:  # the rollout lane evaluates; on_eval runs on this thread
                while not evals.empty():
                    for record in evals.get():
                        on_eval(record)

            def step_done(out: StepOutcome) -> None:
                record_step(out)
                report_evals()
                ops.at_step_boundary(out.metrics.step)

            lanes = OverlappedSteps(
                settings,
                start,
                stack.controller,
                stack.pool,
                stack.teacher,
                tasks_of,
                lambda step, cumulative_s: evals.put(evaluated(step, cumulative_s)),
                lambda ref: ray.put(ray.get(ref)),
            )
            stack.learner.keep_before_close(lanes.own_weights)
            lanes.run(lambda: stack.learner, cumulative, step_done)
            report_evals()
        live.set_phase("finished")
        return settings.optim.steps
