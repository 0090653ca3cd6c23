"""`turnopd eval`: success rate and Avg@n of a checkpoint on a split, per task type, via the rollout pool."""

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from services.cli.options import settings_with
from services.contracts.jsonl import write_jsonl
from services.contracts.rollout import EvalReport, RolloutResult, TaskTypeScore
from services.models.trained_format import check_task_reminder
from services.rollout_worker.eval_runner import EvalProgress, EvalSpec, run_eval
from services.rollout_worker.evaluation import PAPER_LABELS


class _ProgressBar(EvalProgress):
    """Setup stages as the bar's description, then one step per finished episode."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._task = progress.add_task("starting", total=None)

    def stage(self, description: str) -> None:
        self._progress.update(self._task, description=description)

    def start(self, total_episodes: int) -> None:
        self._progress.update(self._task, description="playing episodes", total=total_episodes, completed=0)

    def advance(self, result: RolloutResult) -> None:
        self._progress.advance(self._task, len(result.trajectories) + len(result.failures))


def eval_(
    model: Annotated[
        str, typer.Option(help="Checkpoint: 'teacher', 'student', another zoo name, or a path.")
    ],
    env: Annotated[str | None, typer.Option(help="Env backend (config: rollout.env).")] = None,
    split: Annotated[str, typer.Option(help="Game split.")] = "valid_unseen",
    episodes: Annotated[int, typer.Option(min=1, help="Games to play (task types round-robin).")] = 30,
    n: Annotated[int | None, typer.Option(min=1, help="Samples per game (config: eval.val_n).")] = None,
    temperature: Annotated[
        float | None, typer.Option(min=0.0, help="Sampling temperature (config: eval.val_temperature).")
    ] = None,
    max_turns: Annotated[
        int | None, typer.Option(min=1, help="Turn cap (config: rollout.max_turns).")
    ] = None,
    max_new_tokens: Annotated[
        int | None, typer.Option(min=1, help="Tokens per response (config: models.max_new_tokens).")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(min=0, help="Seed of games and sampling (config: run.seed).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Rollout workers (config: cluster.rollout_workers).")
    ] = None,
    env_url: Annotated[
        str | None, typer.Option(help="A running env gateway (default: start one for this run).")
    ] = None,
    trajectories: Annotated[
        Path | None, typer.Option(help="Also write every played trajectory to this JSONL file.")
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table.")
    ] = False,
    config: Annotated[Path | None, typer.Option(help="TOML config; flags given here override it.")] = None,
) -> None:
    """Evaluate a checkpoint: success rate, Avg@n and the per-task-type table, reproducible from --seed."""
    settings = settings_with(
        config,
        eval={"val_n": n, "val_temperature": temperature},
        rollout={"max_turns": max_turns},
        models={"max_new_tokens": max_new_tokens},
        run={"seed": seed},
        cluster={"rollout_workers": workers},
    )
    # one-line error before anything starts: a missing model, or one trained in another format
    check_task_reminder(
        model, settings.models.cache_dir, settings.rollout.task_reminder, env or settings.rollout.env
    )
    spec = EvalSpec(
        model=model,
        env=env or settings.rollout.env,
        split=split,
        episodes=episodes,
        n=settings.eval.val_n,
        temperature=settings.eval.val_temperature,
        max_turns=settings.rollout.max_turns,
        seed=settings.run.seed,
        max_new_tokens=settings.models.max_new_tokens,
    )
    console = Console(stderr=True)
    columns = (TextColumn("{task.description:<44}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        run = run_eval(settings, spec, env_url=env_url, config=config, progress=_ProgressBar(progress))
    report = run.report
    if trajectories is not None:
        write_jsonl(trajectories, run.result.trajectories)
    if json_output:
        print(report.model_dump_json())
    else:
        Console(width=None if sys.stdout.isatty() else 120).print(report_table(report))


def report_table(report: EvalReport) -> Table:
    """The paper's category table: one row per task type (webshop: per category), then the overall scores."""
    table = Table(
        title=f"{report.model} on {report.env}/{report.split}: {report.overall.tasks} games x n={report.n}, "
        f"T={report.temperature:g}, max {report.max_turns} turns, seed {report.seed}",
        caption=f"weights v{report.weights_version}; {report.truncated_episodes} episodes truncated; "
        f"{report.generated_tokens:,} tokens in {report.wall_s:.0f}s",
    )
    headers = (
        "task type",
        "",
        "games",
        "episodes",
        "success",
        f"Avg@{report.n}",
        f"Pass@{report.n}",
        "reward",
    )
    for name in headers:
        table.add_column(name, justify="left" if name in ("task type", "") else "right", no_wrap=True)
    table.add_column("turns", justify="right")
    table.add_column("failed", justify="right")
    for task_type, score in report.per_task_type.items():
        table.add_row(task_type, PAPER_LABELS.get(task_type, ""), *_cells(score))
    table.add_section()
    table.add_row("overall", "", *_cells(report.overall), style="bold")
    return table


def _cells(score: TaskTypeScore) -> list[str]:
    return [
        str(score.tasks),
        str(score.episodes),
        f"{100 * score.success_rate:.1f}%",
        f"{100 * score.avg_at_n:.1f}",
        f"{100 * score.pass_at_n:.1f}",
        f"{score.mean_reward:.3f}",
        f"{score.mean_turns:.1f}",
        str(score.failed_episodes),
    ]
