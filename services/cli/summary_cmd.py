"""`turnopd summary RUN_DIR [--json]`: a run's time split, pool load, controller depths and evaluations."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from services.cli.result_view import load_result, render_result
from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.contracts.run_summary import RunSummary
from services.errors import NotFoundError
from services.orchestrator.run_summary import summarize
from services.run_dir import CONFIG_FILE, RunDir
from services.settings.tree import saved_settings


def render(summary: RunSummary, console: Console) -> None:
    console.print(
        f"{summary.method}: {summary.steps} steps in {summary.wall_s:.0f} s "
        f"({summary.mean_step_s:.1f} s/step, evaluations excluded); rollout "
        f"{summary.generated_tokens_per_s:.0f} generated tokens/s"
    )
    split = Table(title="Where the step time went")
    for col in ("phase", "seconds", "share"):
        split.add_column(col, justify="right")
    for phase, time in summary.time_split.items():
        split.add_row(phase, f"{time.seconds:.1f}", f"{100 * time.share:.1f}%")
    console.print(split)
    load = summary.pool_load
    if load is not None:
        pools = Table(title="How busy each pool was (share of the step time)")
        for col in ("pool", "busy"):
            pools.add_column(col, justify="right")
        for pool, share in load.busy.items():
            pools.add_row(pool, f"{100 * share:.1f}%")
        pools.add_row("two or more at once", f"{100 * load.overlap:.1f}%")
        console.print(pools)
    console.print("Controller, per step (P: probe at full depth):")
    depths = (
        [(f"{s.env}: ", s.probe_steps, s.h_roll, s.h_hat) for s in summary.sources]
        if summary.sources
        else [("", summary.probe_steps, summary.h_roll, summary.h_hat)]
    )
    for name, probe_steps, h_roll, h_hat in depths:
        probes = set(probe_steps)
        console.print(
            f"  {name}h_roll "
            + " ".join(f"{h}{'P' if k + 1 in probes else ''}" for k, h in enumerate(h_roll))
        )
        console.print(f"  {name}H_hat  " + " ".join(str(h) for h in h_hat))
    if any(lag is not None for lag in summary.weights_lag):
        lags = " ".join("-" if lag is None else str(lag) for lag in summary.weights_lag)
        console.print(f"  lag    {lags}  (weights versions behind; 0: on-policy)")
    evals = Table(title="Evaluations (Avg@n on the validation split)")
    for col in (
        "after step",
        *(["env"] if summary.sources else []),
        "episodes x n",
        "success",
        "Avg@n",
        "cumulative s",
    ):
        evals.add_column(col, justify="right")
    for e in summary.evals:
        evals.add_row(
            str(e.step),
            *([e.env or ""] if summary.sources else []),
            f"{e.episodes} x {e.n}",
            f"{100 * e.success_rate:.1f}%",
            f"{e.avg_at_n:.3f}",
            f"{e.cumulative_s:.0f}",
        )
    console.print(evals)
    changes = [(f" ({s.env})", s.success_change) for s in summary.sources or []] or [
        ("", summary.success_change)
    ]
    for name, change in changes:
        if change is not None:
            console.print(f"success rate change{name}, first to last evaluation: {100 * change:+.1f} points")


def summary(
    run_dir: Annotated[Path, typer.Argument(help="A `turnopd train` run directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
) -> None:
    """A run's time split (rollout / teacher / learner / other), controller depths and evaluations."""
    metrics_path = run_dir / "metrics.jsonl"
    if not metrics_path.is_file():
        raise NotFoundError(f"{metrics_path} not found: is {run_dir} a `turnopd train` run directory?")
    eval_path = run_dir / "eval.jsonl"
    evals = read_jsonl(eval_path, EvalRecord) if eval_path.is_file() else []
    result = summarize(read_jsonl(metrics_path, StepMetrics), evals)
    if as_json:
        typer.echo(result.model_dump_json())
    else:
        console = Console()
        render(result, console)
        if (run_dir / CONFIG_FILE).is_file():
            settings = saved_settings(RunDir(run_dir).saved_config())
            render_result(load_result(run_dir, settings), console)
