"""The run's result as a short table: the student before and after, the teacher, wall time, H_hat."""

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.errors import TurnOPDError
from services.models.registry import resolve_model_dir
from services.models.shipped import measured_success
from services.orchestrator.run_result import RunResult, Score, run_result
from services.run_dir import EVAL_FILE, METRICS_FILE
from services.settings.tree import TurnOPDSettings

SUCCESS_FIGURE = "success.png"


def eval_description(settings: TurnOPDSettings) -> dict[str, object]:
    """The run's evaluation, in the keys a shipped manifest records its measurement with."""
    return {
        "env": settings.rollout.env,
        "split": settings.eval.split,
        "games": settings.eval.episodes,
        "n": settings.eval.val_n,
        "temperature": settings.eval.val_temperature,
        "max_turns": settings.rollout.max_turns,
        "seed": settings.eval.seed,
    }


def load_result(run_root: Path, settings: TurnOPDSettings) -> RunResult:
    evals = read_jsonl(run_root / EVAL_FILE, EvalRecord) if (run_root / EVAL_FILE).is_file() else []
    metrics = read_jsonl(run_root / METRICS_FILE, StepMetrics) if (run_root / METRICS_FILE).is_file() else []
    teacher, student = (
        _measured(name, settings) for name in (settings.models.teacher, settings.models.student)
    )
    return run_result(evals, [m.h_hat for m in metrics], teacher, eval_description(settings), student)


def _measured(model: str, settings: TurnOPDSettings) -> dict[str, Any] | None:
    """A shipped model's measured success (None: not shipped, or not measured)."""
    try:
        return measured_success(resolve_model_dir(model, settings.models.cache_dir))
    except TurnOPDError:
        return None


def _cell(score: Score | None) -> str:
    if score is None:
        return "-"
    low, high = score.interval
    return f"{100 * score.rate:.1f}%  [{100 * low:.0f}, {100 * high:.0f}]"


def render_result(result: RunResult, console: Console, wall_s: float | None = None) -> None:
    table = Table(title="Result (success on the validation games; 95% Wilson interval)")
    table.add_column("", justify="left")
    table.add_column("success", justify="right")
    table.add_column("episodes", justify="right")
    for label, score in (
        (result.before.label if result.before else "student before training", result.before),
        (result.after.label if result.after else "student after training", result.after),
        ("teacher, same games", result.teacher),
    ):
        table.add_row(label, _cell(score), str(score.episodes) if score else "-")
    ratio = result.student_over_teacher
    table.add_row("student / teacher", "-" if ratio is None else f"{100 * ratio:.0f}%", "")
    if wall_s is not None:
        table.add_row("wall time (start-up and evaluations included)", f"{wall_s / 60:.1f} min", "")
    console.print(table)
    console.print(f"teacher: {result.teacher_note}")
    console.print(f"H_hat after each of the {result.steps} steps: {' '.join(map(str, result.h_hat)) or '-'}")
    if len(result.curve) > 1:
        console.print(
            "success over the run: " + "  ->  ".join(f"step {step} {_cell(s)}" for step, s in result.curve)
        )
    if result.climbed is not None:
        verdict = "lies above" if result.climbed else "does not lie above"
        console.print(f"the 'after' interval {verdict} the 'before' interval")


def write_success_figure(result: RunResult, run_root: Path) -> Path | None:
    """``success.png`` in the run directory: the student's success after each evaluation (two or more)."""
    if len(result.curve) < 2:
        return None
    from services.experiments.figures import success_figure  # matplotlib only when there is a figure

    return success_figure(result.curve, result.teacher, run_root / SUCCESS_FIGURE)
