"""`turnopd serve ...`: run one TurnOPD service as a standalone server (one command per service)."""

from pathlib import Path
from typing import Annotated

import typer

from services.cli.options import settings_with

app = typer.Typer(help="Run a TurnOPD service as a standalone server.", no_args_is_help=True)

ConfigOption = Annotated[Path | None, typer.Option(help="TOML config; flags given here override it.")]


@app.command("env-gateway")
def env_gateway(
    host: Annotated[str | None, typer.Option(help="Bind address (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8100).")] = None,
    workers: Annotated[int | None, typer.Option(help="Env worker processes (default 2).")] = None,
    config: ConfigOption = None,
) -> None:
    """Serve the env gateway (HTTP API + env worker pool) with uvicorn until interrupted."""
    settings = settings_with(config, env_gateway={"host": host, "port": port, "workers": workers})
    from services.env_gateway.main import serve

    serve(settings.env_gateway)
