"""Run a comparison's planned runs one after another in this process, then summarise them.

Each run is one ``pipeline.train`` call: it starts its own services (and a local Ray, unless one is
already up) and tears all of them down before the next run starts. A complete run is skipped; a
partial one continues from its last checkpoint, exactly like ``turnopd train --resume``.
"""

from collections.abc import Callable, Sequence
from pathlib import Path

from services.contracts.experiments import ComparisonSummary
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.experiments.compare_dir import SUMMARY_FILE, SUMMARY_MARKDOWN, load_run, write_atomic
from services.experiments.compare_plan import PlannedRun
from services.experiments.protocols import summarise
from services.experiments.run_start import opened
from services.experiments.tables import comparison_markdown

RunCallback = Callable[[PlannedRun], None]
StepCallback = Callable[[StepMetrics], None]
EvalCallback = Callable[[EvalRecord], None]


def run_planned(
    planned: Sequence[PlannedRun],
    on_run: RunCallback,
    on_step: StepCallback,
    on_eval: EvalCallback,
) -> None:
    """Train every run that is not complete yet, in order."""
    for run in planned:
        if run.state == "complete":
            continue
        from services.orchestrator.pipeline import train  # Ray loads only when something is trained

        on_run(run)
        train(run.settings, opened(run.settings, run.state), on_step, on_eval)


def write_summary(planned: Sequence[PlannedRun], out: Path, config: Path | None) -> ComparisonSummary:
    """Score every run with the protocols; write ``summary.json`` and ``summary.md`` into ``out``."""
    steps = planned[0].settings.optim.steps
    summary = summarise(
        [load_run(run.path) for run in planned], steps, config=None if config is None else str(config)
    )
    write_atomic(out / SUMMARY_FILE, summary.model_dump_json(indent=2) + "\n")
    write_atomic(out / SUMMARY_MARKDOWN, comparison_markdown(summary))
    return summary
