"""`turnopd compare`: train several methods x seeds under one config, then score them (Same-Step, Least-Time)."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.experiments.compare_dir import SUMMARY_FILE, SUMMARY_MARKDOWN
from services.experiments.compare_plan import PlannedRun, parse_methods, plan_runs
from services.experiments.tables import Table, comparison_table
from services.run_dir import METRICS_FILE, RunDir

ALL_METHODS = "turnopd,vanilla,adaptive-depth,blend,turn-norm,tcod"


def print_table(table: Table, console: Console) -> None:
    rich = RichTable(title=table.title, caption=table.note)
    for i, name in enumerate(table.header):
        rich.add_column(name, justify="left" if i == 0 else "right")
    for row in table.rows:
        rich.add_row(*row)
    console.print(rich)


def compare(
    out: Annotated[
        Path, typer.Option(help="Comparison directory: DIR/<method>/seed<s>/ and DIR/summary.json.")
    ],
    config: Annotated[Path | None, typer.Option(help="Run config (TOML) shared by every run.")] = None,
    methods: Annotated[str, typer.Option(help="Comma-separated methods, in table order.")] = ALL_METHODS,
    seeds: Annotated[int, typer.Option(help="Seeds per method: run.seed, run.seed+1, ...")] = 1,
    steps: Annotated[
        int | None, typer.Option(help="Optimizer steps K of every run (config: optim.steps).")
    ] = None,
) -> None:
    """Run every (method, seed) one after another (complete runs reused, partial ones resumed), then summarise."""
    run_comparison(plan_runs(config, parse_methods(methods), seeds, steps, out), out, config)


def run_comparison(planned: list[PlannedRun], out: Path, config: Path | None) -> None:
    """Train the planned runs that are not complete, with progress bars, then write and print the
    summary (``compare``'s work once its runs are planned; ``bench/frontier.py`` plans its own)."""
    console = Console(stderr=True)
    for run in planned:
        console.print(f"{run.method:>15} seed {run.seed}: {run.state:<8} {run.path}", soft_wrap=True)
    from services.experiments.compare_runner import run_planned, write_summary  # loads Ray

    k = planned[0].settings.optim.steps
    todo = [run for run in planned if run.state != "complete"]
    with Progress(
        TextColumn("[bold]{task.description}[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        runs_bar = progress.add_task(
            "runs", total=len(planned), completed=len(planned) - len(todo), status=""
        )
        steps_bar = progress.add_task("steps", total=k, status="", visible=bool(todo))
        started: list[PlannedRun] = []

        def on_run(run: PlannedRun) -> None:
            if started:
                progress.advance(runs_bar)
            started.append(run)
            done = len(RunDir(run.path).steps_logged(METRICS_FILE))
            progress.update(runs_bar, status=f"{run.method} seed {run.seed}")
            progress.reset(steps_bar, total=k, completed=done, status="starting services")

        def on_step(m: StepMetrics) -> None:
            progress.update(
                steps_bar,
                completed=m.step,
                status=f"H_roll={m.h_roll:<3} alpha={m.alpha:.2f} KL={m.mean_kl:.3f} {m.times.total_s:.1f}s "
                f"(total {m.cumulative_s:.0f}s)",
            )

        def on_eval(r: EvalRecord) -> None:
            run = started[-1]
            progress.console.print(
                f"{run.method} seed {run.seed}: eval after step {r.step}: Avg@{r.n} {r.avg_at_n:.3f} "
                f"at {r.cumulative_s:.0f}s"
            )

        run_planned(planned, on_run, on_step, on_eval)
        progress.update(runs_bar, completed=len(planned), status="scoring")
    summary = write_summary(planned, out, config)
    print_table(comparison_table(summary), Console())
    console.print(
        f"summary: {out / SUMMARY_FILE} ({SUMMARY_MARKDOWN} beside it); figures: turnopd report {out} --out DIR",
        soft_wrap=True,
    )
