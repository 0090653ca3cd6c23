"""`turnopd serve ...`: run a TurnOPD service as a Ray Serve application."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from services.cli.options import settings_with
from services.teacher_scorer.engine import checkpoint_dir

app = typer.Typer(help="Run a TurnOPD service (Ray Serve application).", no_args_is_help=True)


@app.command("teacher")
def teacher(
    model: Annotated[str | None, typer.Option(help="Teacher checkpoint directory [teacher.model].")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port [default: 8000].")] = None,
    host: Annotated[str | None, typer.Option(help="HTTP bind address [default: 127.0.0.1].")] = None,
    engine: Annotated[str | None, typer.Option(help="transformers or vllm [default: transformers].")] = None,
    device: Annotated[str | None, typer.Option(help="Torch device: cpu, cuda, auto [default: cpu].")] = None,
    replicas: Annotated[int | None, typer.Option(help="Replicas [default: 1].")] = None,
    config: Annotated[
        Path | None, typer.Option(help="TOML config whose [teacher] gives the defaults.")
    ] = None,
) -> None:
    """Serve the teacher's top-K log-probs: POST /v1/score, GET /healthz, GET /metrics."""
    settings = settings_with(
        config,
        teacher={
            "model": model,
            "port": port,
            "host": host,
            "engine": engine,
            "device": device,
            "replicas": replicas,
        },
    )
    checkpoint_dir(settings.teacher.model)  # fail in one line before Ray starts
    from services.teacher_scorer.standalone import serve_teacher  # Ray loads only for this command

    serve_teacher(settings, Console(stderr=True))
