"""`turnopd report RUN_DIR_OR_COMPARE_DIR... --out DIR`: the paper's figures and tables as PNGs + HTML."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console


def report(
    paths: Annotated[
        list[Path], typer.Argument(help="Run directories and/or `turnopd compare` directories.")
    ],
    out: Annotated[Path, typer.Option(help="Where report.html, report.md and the PNG figures go.")],
    smooth: Annotated[int, typer.Option(help="Trailing window (steps) of the smoothed line panels.")] = 5,
    min_survivors: Annotated[
        int | None, typer.Option(help="Reliable prefix: min survivors (default: the run's config).")
    ] = None,
    min_survivor_frac: Annotated[
        float | None, typer.Option(help="Reliable prefix: min share of turn 0 (default: the run's config).")
    ] = None,
    min_step_frac: Annotated[
        float | None, typer.Option(help="Reliable prefix: min share of steps (default: the run's config).")
    ] = None,
) -> None:
    """Figures (turn KL + teacher entropy, G_t by phase, loss share, controller, frontier) and tables."""
    from services.experiments.report_build import build_report  # matplotlib loads only for this command

    thresholds = {
        k: v
        for k, v in {
            "min_survivors": min_survivors,
            "min_survivor_frac": min_survivor_frac,
            "min_step_frac": min_step_frac,
        }.items()
        if v is not None
    }
    console = Console(stderr=True)
    with console.status("rendering figures"):
        result = build_report(paths, out, smooth, thresholds)
    for note in result.notes:
        console.print(note)
    console.print(
        f"{result.html} ({len(result.figures)} figures, {result.markdown.name} beside it)", soft_wrap=True
    )
