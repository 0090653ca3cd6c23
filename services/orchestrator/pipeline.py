"""`turnopd train`: the step loop over the services of ``stack.py``, with logs, metrics and evaluation."""

import json
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import ray
from prometheus_client import CollectorRegistry

from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.diagnostics.step_stats import step_stats
from services.learner.checkpoint import drop_checkpoints_after, latest_checkpoint
from services.orchestrator.evaluation import evaluate
from services.orchestrator.live_status import LiveRun
from services.orchestrator.metrics_exporter import MetricsExporter
from services.orchestrator.restart_loop import RestartLoop
from services.orchestrator.restarts import ServiceRestarts
from services.orchestrator.run_control import start_run_control, stop_run_control
from services.orchestrator.run_dir import DECISIONS_FILE, EVAL_FILE, METRICS_FILE, TURN_STATS_FILE, RunDir
from services.orchestrator.stack import Stack, connect_ray, start_stack
from services.orchestrator.step import run_step
from services.orchestrator.tasks import step_tasks
from services.orchestrator.training_metrics import TrainingMetrics
from services.settings.tree import TurnOPDSettings

StepCallback = Callable[[StepMetrics], None]
EvalCallback = Callable[[EvalRecord], None]


def _cumulative_before(run: RunDir) -> float:
    path = run.path(METRICS_FILE)
    if not path.exists():
        return 0.0
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return float(rows[-1]["cumulative_s"]) if rows else 0.0


def _resume(stack: Stack, run: RunDir) -> int:
    """Line the run up with the learner's last checkpoint: logs, controller and rollout weights."""
    start = stack.learner.resumed_step
    run.truncate_after(start)
    stack.controller.rewind(start)
    checkpoint = latest_checkpoint(run.root)
    if start > 0 and checkpoint is not None:
        from safetensors.torch import load_file

        stack.pool.publish_weights(ray.put(load_file(checkpoint / "model.safetensors")), start)
    return start


def _eval_due(settings: TurnOPDSettings, step: int) -> bool:
    """Whether the schedule evaluates after ``step`` (step 0: before training, if ``eval.at_start``)."""
    if step == 0:
        return settings.eval.at_start
    return step % settings.eval.interval == 0 or step == settings.optim.steps


def train(
    settings: TurnOPDSettings,
    run: RunDir,
    config_file: Path | None,
    on_step: StepCallback,
    on_eval: EvalCallback,
) -> int:
    """Run steps after the last checkpoint up to ``optim.steps``; return the last step done.

    While it runs, the `run-control` actor serves `turnopd status` and `turnopd restart`.
    """
    # A run stopped between the learner's checkpoint and that step's log lines would resume with the
    # step missing from every log: resume from the last step the logs hold instead.
    drop_checkpoints_after(run.root, max(run.steps_logged(METRICS_FILE), default=0))
    with ExitStack() as exits:
        exporter = TrainingMetrics(CollectorRegistry(), settings.rollout.max_turns, settings.diagnostics)
        if settings.metrics.enabled:  # first: a port in use or a missing token fails before Ray starts
            m = settings.metrics
            token = settings.security.resolved_service_token()
            exits.enter_context(MetricsExporter(exporter.registry, m.host, m.port, token))
        connect_ray(settings, exits)
        control = start_run_control()
        exits.callback(stop_run_control, control)
        stack = start_stack(settings, run, config_file, exits)
        start = _resume(stack, run)
        restarts = ServiceRestarts(stack)
        live = LiveRun(stack, restarts, control, start)
        ops = RestartLoop(live, restarts).start()
        exits.callback(ops.stop)
        cumulative = _cumulative_before(run)
        if _eval_due(settings, start) and start not in run.steps_logged(EVAL_FILE):
            # A fresh run's start, or a run stopped after its checkpoint but before this evaluation.
            live.set_phase("evaluating")
            record = evaluate(
                stack.pool, settings, step=start, weights_version=start, cumulative_s=cumulative
            )
            run.append(EVAL_FILE, record.model_dump_json())
            live.eval_done(record)
            on_eval(record)
        live.set_phase("training")
        env = settings.rollout.env
        for k in range(start + 1, settings.optim.steps + 1):
            tasks = step_tasks(
                env,
                "train",
                settings.optim.batch,
                settings.rollout.n,
                k,
                settings.run.seed,
                settings.rollout.task_types,
            )
            out = run_step(
                k, tasks, settings, stack.controller, stack.pool, stack.teacher, stack.learner, cumulative
            )
            cumulative = out.metrics.cumulative_s
            run.append(TURN_STATS_FILE, out.result.turn_stats.model_dump_json())
            run.append(DECISIONS_FILE, out.decision.model_dump_json())
            run.append(METRICS_FILE, out.metrics.model_dump_json())
            exporter.observe(
                out.metrics,
                step_stats(out.result.turn_stats, settings.blend.min_floor, settings.blend.min_frac),
                learner=out.result,
            )
            exporter.observe_pool(stack.pool.stats, len(stack.pool.live_workers))
            live.step_done(out.metrics)
            on_step(out.metrics)
            if _eval_due(settings, k):
                live.set_phase("evaluating")
                record = evaluate(stack.pool, settings, step=k, weights_version=k, cumulative_s=cumulative)
                run.append(EVAL_FILE, record.model_dump_json())
                live.eval_done(record)
                on_eval(record)
                live.set_phase("training")
            ops.at_step_boundary(k)
        live.set_phase("finished")
        return settings.optim.steps
