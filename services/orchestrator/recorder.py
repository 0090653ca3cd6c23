"""The recorder part of the step loop: what a finished step and an evaluation leave behind, in the
run directory, the Prometheus exporter, `turnopd status` and the console, in that order."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.diagnostics.step_stats import step_stats
from services.learner.checkpoint import prune_checkpoints
from services.operations.controller_rebuilds import RebuildNotices
from services.operations.live_status import LiveRun
from services.orchestrator.step import StepOutcome
from services.orchestrator.training_metrics import TrainingMetrics
from services.run_dir import DECISIONS_FILE, EVAL_FILE, METRICS_FILE, TURN_STATS_FILE, RunDir


@dataclass(frozen=True)
class RecordSettings:
    """The recorder's piece of the settings."""

    keep_checkpoints: int
    min_floor: int  # [blend]: the step statistics' reliability floor
    min_frac: float


class Recorder:
    def __init__(
        self,
        plan: RecordSettings,
        run: RunDir,
        exporter: TrainingMetrics,
        live: LiveRun,
        rebuilds: RebuildNotices,
        on_step: Callable[[StepMetrics], None],
        on_eval: Callable[[EvalRecord], None],
    ) -> None:
        self.plan = plan
        self.run = run
        self.exporter = exporter
        self.live = live
        self.rebuilds = rebuilds
        self.on_step = on_step
        self.on_eval = on_eval

    def step(self, out: StepOutcome) -> None:
        """Log step ``out``: its turn statistics, decisions and metrics line, then everything else."""
        for record in out.turn_stats:  # one per source of a multi-environment run
            self.run.append(TURN_STATS_FILE, record.model_dump_json())
        for decision in out.decisions:
            self.run.append(DECISIONS_FILE, decision.model_dump_json())
        self.run.append(METRICS_FILE, out.metrics.model_dump_json())
        # only now may the checkpoint this step replaces go (a crash before the line: it is the resume's)
        prune_checkpoints(self.run.root, self.plan.keep_checkpoints, out.metrics.step)
        stats = step_stats(out.result.turn_stats, self.plan.min_floor, self.plan.min_frac)
        self.exporter.observe(out.metrics, stats, learner=out.result)
        pool = self.live.stack.pool
        self.exporter.observe_pool(
            pool.stats, len(pool.live_workers), self.live.stack.services.teacher_replicas
        )
        self.live.step_done(out.metrics)
        self.rebuilds.check()
        self.on_step(out.metrics)

    def evaluations(self, records: Sequence[EvalRecord]) -> None:
        """Log an evaluation (a record per source)."""
        for record in records:
            self.run.append(EVAL_FILE, record.model_dump_json())
            self.live.eval_done(record)
        for record in records:
            self.on_eval(record)
