"""`turnopd train`: the run over the services of ``stack.py``: resume, the step loop
(``step_loop.py``, one asyncio loop for every ``[pipeline] max_staleness``), logs, metrics and
evaluation.
"""

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from contextlib import ExitStack

import ray
from prometheus_client import CollectorRegistry

from services.blocking import blocking
from services.contracts.operations import RunPhase
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.contracts.rollout import EpisodeTask
from services.learner.checkpoint import checkpoint_dir, drop_checkpoints_after
from services.operations.controller_rebuilds import RebuildNotices
from services.operations.learner_ops import LearnerUnplaceable
from services.operations.live_status import LiveRun
from services.operations.plan_file import write_plan
from services.operations.restart_loop import RestartLoop
from services.operations.restarts import ServiceRestarts
from services.operations.run_control import start_run_control, stop_run_control
from services.operations.stack import Stack, connect_ray, start_stack
from services.orchestrator.busy_time import PoolActivity
from services.orchestrator.dispatcher import Dispatcher
from services.orchestrator.evaluation import EvalPlan, evaluate
from services.orchestrator.learner_recovery import LearnerRecovery, initial_weights
from services.orchestrator.metrics_exporter import MetricsExporter
from services.orchestrator.planner import Planner
from services.orchestrator.recorder import Recorder, RecordSettings
from services.orchestrator.resume_checks import (
    check_before_drop,
    check_resumed,
    check_stop_after,
    first_checkpoint_step,
)
from services.orchestrator.run_plan import LoopSettings
from services.orchestrator.source_mix import StepSources
from services.orchestrator.step_loop import StepLoop
from services.orchestrator.tasks import mixed_step_tasks
from services.orchestrator.training_metrics import TrainingMetrics
from services.run_dir import EVAL_FILE, METRICS_FILE, RunDir
from services.settings.tree import TurnOPDSettings

log = logging.getLogger(__name__)
StepCallback = Callable[[StepMetrics], None]
EvalCallback = Callable[[EvalRecord], None]


def _cumulative_before(run: RunDir) -> float:
    rows = run.records(METRICS_FILE)
    return float(rows[-1]["cumulative_s"]) if rows else 0.0


def _resume(stack: Stack, run: RunDir, sources: StepSources, last_logged: int, first_checkpoint: int) -> int:
    """Line the run up with the checkpoint the learner resumed from: logs, controller and rollout
    weights (refused where that would erase checkpointed steps: ``check_resumed``)."""
    start = stack.learner.resumed_step
    line_up(stack, run, sources, start, last_logged, first_checkpoint)
    return start


def line_up(
    stack: Stack,
    run: RunDir,
    sources: StepSources,
    start: int,
    last_logged: int,
    first_checkpoint: int,
    rewind: bool = False,
) -> None:
    """Cut the logs back to step ``start`` (the learner's checkpoint), rewind every source's
    controller to it and publish its weights to the pool (``rewind``: the pool holds later ones)."""
    check_resumed(run.root, start, last_logged, first_checkpoint)
    run.truncate_after(start)
    for key in sources.keys:  # every source's controller
        stack.controller.rewind(start, key)
    if start > 0:
        from safetensors.torch import load_file

        weights = load_file(checkpoint_dir(run.root, start) / "model.safetensors")
        stack.pool.publish_weights(ray.put(weights), start, rewind=rewind)
    elif rewind:
        stack.pool.publish_weights(
            ray.put(initial_weights(stack.models.student, stack.models.cache_dir)),
            0,
            rewind=True,
        )


def _eval_size(plan: EvalPlan) -> str:
    e = plan.eval
    where = [
        f"{e.episodes} {s.eval_split}" + (f" {s.env}" if plan.multi_source else "") for s in plan.sources
    ]
    return f"{', '.join(where)} episodes x {e.val_n}, temperature {e.val_temperature:g}"


def train(
    settings: TurnOPDSettings,
    run: RunDir,
    on_step: StepCallback,
    on_eval: EvalCallback,
    on_phase: Callable[[str], None] = lambda _: None,
    stop_after: int | None = None,
) -> int:
    """Run steps after the last checkpoint up to ``optim.steps``; return the last step done.

    ``on_phase``: told, in words, when the run starts a phase (an evaluation the driver waits for,
    training), so a console can say what a long wait is.

    ``stop_after``: end this sitting after that step (a checkpoint step, so a resume goes on from
    it); the run stays the ``optim.steps``-step run it is (the blend's schedule, the evaluations), so
    its steps are those of the whole run, and a later resume trains the rest.

    While it runs, the `run-control` actor serves `turnopd status` and `turnopd restart`.
    """
    # A run stopped between the learner's checkpoint and that step's log lines would resume with the
    # step missing from every log: resume from the last step the logs hold instead.
    last_logged = max(run.steps_logged(METRICS_FILE), default=0)
    if stop_after is not None:  # before anything is dropped or started
        check_stop_after(stop_after, last_logged, settings.learner.checkpoint_every, settings.optim.steps)
    first_checkpoint = first_checkpoint_step(settings.learner.checkpoint_every, settings.optim.steps)
    check_before_drop(run.root, last_logged, first_checkpoint)
    drop_checkpoints_after(run.root, last_logged)
    sources = StepSources.of(settings)  # the task sources, resolved once for the run
    plan = LoopSettings.of(settings)
    if stop_after is not None:
        plan = dataclasses.replace(plan, steps=stop_after)
    eval_plan = EvalPlan.of(settings, sources.sources)
    with ExitStack() as exits:
        exporter = TrainingMetrics(
            CollectorRegistry(),
            max(source.max_turns for source in sources.sources),
            settings.diagnostics,
            sources.sources[0].env,
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
        start = _resume(stack, run, sources, last_logged, first_checkpoint)
        rebuilds = RebuildNotices(stack.controller)  # what the controller rebuilt of what Redis lost
        rebuilds.check()
        restarts = ServiceRestarts(stack.services)
        live = LiveRun(stack, restarts, control, start, settings.run.method, settings.optim.steps)
        record_plan = RecordSettings(
            settings.learner.keep_checkpoints, settings.blend.min_floor, settings.blend.min_frac
        )
        driver_parts = {"step_loop": plan, "evaluator": eval_plan, "recorder": record_plan}

        def plan_file() -> None:
            write_plan(run, stack.services, driver_parts)

        plan_file()  # what each service and part was handed; again after a restart with --config
        cumulative = _cumulative_before(run)
        recorder = Recorder(
            record_plan,
            run,
            exporter,
            live,
            rebuilds,
            on_step,
            on_eval,
        )

        def phase(state: RunPhase, text: str) -> None:
            """Tell `turnopd status` (``state``) and the console (``text``) what the run does now."""
            live.set_phase(state)
            on_phase(text)

        def evaluated(step: int, cumulative_s: float) -> None:
            """Evaluate the weights the pool holds (version ``step``) on every source and log it."""
            when = f"before step {step + 1}" if step == start else f"after step {step}"
            phase("evaluating", f"evaluating the student {when} ({_eval_size(eval_plan)})")
            recorder.evaluations(
                evaluate(stack.pool, eval_plan, step=step, weights_version=step, cumulative_s=cumulative_s)
            )
            phase("training", "training")

        def tasks_of(k: int) -> list[EpisodeTask]:
            return mixed_step_tasks(
                sources.sources, settings.optim.batch, settings.rollout.n, k, settings.run.seed
            )

        def step_loop(first: int) -> StepLoop:
            return StepLoop(
                plan,
                first,
                Planner(stack.controller, sources, plan.staleness),
                Dispatcher(plan.play, stack.pool, stack.teacher, PoolActivity()),
                tasks_of,
                evaluated,
                lambda ref: ray.put(ray.get(ref)),
            )

        async def drive() -> None:
            """The run on one event loop: the teachers' start-up checks, the restart loop (a task
            beside the steps), the first evaluation, the step loop and each learner recovery."""
            nonlocal start, cumulative
            await asyncio.gather(*(teacher.preflight() for teacher in stack.services.teachers))
            ops = RestartLoop(live, restarts, on_restarted=plan_file).start()
            try:
                if plan.evals.due(start) and start not in run.steps_logged(EVAL_FILE):
                    # a fresh run, or one stopped after its checkpoint
                    await blocking(evaluated, start, cumulative)
                else:
                    phase("training", "training")
                loops: list[StepLoop] = []
                # before a learner closes, the loop copies the weights it holds and has not published
                stack.learner.keep_before_close(lambda: loops[-1].own_weights())
                recovery = LearnerRecovery(
                    settings.learner.max_restarts, first_checkpoint, stack, run, restarts, live
                )
                while True:
                    loops.append(loop := step_loop(start))
                    try:
                        await loop.run(stack.learner, cumulative, recorder.step, ops.at_step_boundary)
                        return
                    except Exception as exc:
                        if loop.learner_failure is not exc or not recovery.may_recover(exc):
                            raise
                        lost = exc
                    start = await blocking(recover, recovery, lost)
                    cumulative = _cumulative_before(run)
                    if plan.evals.due(start) and start not in run.steps_logged(EVAL_FILE):
                        await blocking(evaluated, start, cumulative)
            finally:
                await ops.stop()

        def recover(recovery: LearnerRecovery, lost: Exception) -> int:
            """A replacement learner from the last checkpoint, the run lined up with it."""
            try:
                return recovery.recover(lost, lambda checkpoint, logged: line_up(
                    stack, run, sources, checkpoint, logged, first_checkpoint, rewind=True
                ))  # fmt: skip
            except LearnerUnplaceable as why:
                log.error("the lost learner is not restarted: %s", why)
                stop = why.closing or lost  # how the learner failed, with its own cause
                raise stop from stop.__cause__

        asyncio.run(drive())
        live.set_phase("finished")
        return plan.steps
