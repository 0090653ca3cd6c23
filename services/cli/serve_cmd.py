"""`turnopd serve ...`: run one TurnOPD service as a standalone server (one command per service)."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

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
    # Its own sections only: the same file serves a run's gateway and a teacher recipe's.
    settings = settings_with(
        config, ("env_gateway", "security"), env_gateway={"host": host, "port": port, "workers": workers}
    )
    from services.env_gateway.main import serve

    serve(settings.env_gateway, settings.security.resolved_service_token())


@app.command("retrieval")
def retrieval(
    host: Annotated[str | None, typer.Option(help="Bind address (config: retrieval_server.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (config: retrieval_server.port).")] = None,
    corpus: Annotated[
        Path | None, typer.Option(help="Search-R1 corpus JSONL (default: the search env's encyclopedia).")
    ] = None,
    delay_s: Annotated[float | None, typer.Option(help="Failure drill: latency added per request.")] = None,
    fail_every: Annotated[
        int | None, typer.Option(help="Failure drill: every N-th request gets 503.")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Serve Search-R1's POST /retrieve (BM25) for the search env's remote mode, until interrupted."""
    settings = settings_with(
        config,
        retrieval_server={
            "host": host,
            "port": port,
            "corpus": corpus,
            "delay_s": delay_s,
            "fail_every": fail_every,
        },
    )
    from services.retrieval_server.app import serve

    serve(settings)


@app.command("webshop")
def webshop(
    host: Annotated[
        str | None, typer.Option(help="Bind address (config: env_gateway.webshop.server_host).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port (config: env_gateway.webshop.server_port).")] = None,
    max_envs: Annotated[
        int | None,
        typer.Option(
            min=1, help="Open envs before /create answers 503 (config: env_gateway.webshop.server_max_envs)."
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Serve the generated shop over AgentGym's agentenv_webshop HTTP protocol until interrupted."""
    given = {"server_host": host, "server_port": port, "server_max_envs": max_envs}
    overrides = {k: v for k, v in given.items() if v is not None}
    settings = settings_with(config, env_gateway={"webshop": overrides} if overrides else {})
    from services.envs.webshop.server import serve_webshop

    serve_webshop(settings.env_gateway.webshop, settings.env_gateway.resolved_cache_dir())


@app.command("teacher")
def teacher(
    model: Annotated[
        str | None, typer.Option(help="Teacher checkpoint directory (config: teacher.model).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port (default: 8000).")] = None,
    host: Annotated[str | None, typer.Option(help="HTTP bind address (default: 127.0.0.1).")] = None,
    engine: Annotated[str | None, typer.Option(help="transformers or vllm (default: transformers).")] = None,
    device: Annotated[str | None, typer.Option(help="Torch device: cpu, cuda, auto (default: cpu).")] = None,
    replicas: Annotated[int | None, typer.Option(help="Replicas (default: 1).")] = None,
    config: ConfigOption = None,
) -> None:
    """Serve the teacher's top-K log-probs as a Ray Serve app: POST /v1/score, GET /healthz, GET /metrics."""
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
    from services.teacher_scorer.engine import checkpoint_dir

    checkpoint_dir(settings.teacher.model)  # fail in one line before Ray starts
    from services.teacher_scorer.standalone import serve_teacher  # Ray loads only for this command

    serve_teacher(settings, Console(stderr=True))
