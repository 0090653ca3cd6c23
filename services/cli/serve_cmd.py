"""`turnopd serve ...`: run one TurnOPD service as a standalone server (one command per service)."""

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from services.cli.options import settings_with
from services.errors import ConfigError, InputError
from services.settings.env_gateway import EnvGatewaySettings
from services.settings.loader import describe_validation_error

app = typer.Typer(help="Run a TurnOPD service as a standalone server.", no_args_is_help=True)

ConfigOption = Annotated[Path | None, typer.Option(help="TOML config; flags given here override it.")]


def gateway_settings(
    config: Path | None, settings_file: Path | None, flags: dict[str, Any]
) -> EnvGatewaySettings:
    """The gateway's ``[env_gateway]``: from ``config`` (its own sections only: the same file serves a
    run's gateway and a teacher recipe's), or as a run wrote it (``settings_file``); the flags given
    (non-None) override either."""
    given = {k: v for k, v in flags.items() if v is not None}
    if settings_file is None:
        return settings_with(config, ("env_gateway", "security"), env_gateway=given).env_gateway
    if config is not None:
        raise InputError("--settings holds the gateway's whole settings; do not combine it with --config")
    try:
        written = json.loads(settings_file.read_text())
    except FileNotFoundError:
        raise InputError(f"settings file not found: {settings_file}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"settings file {settings_file} is not valid JSON: {exc}") from None
    try:
        return EnvGatewaySettings.model_validate({**written, **given})
    except ValidationError as exc:
        raise ConfigError(f"invalid settings in {settings_file}: {describe_validation_error(exc)}") from None


@app.command("env-gateway")
def env_gateway(
    host: Annotated[str | None, typer.Option(help="Bind address (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8100).")] = None,
    workers: Annotated[int | None, typer.Option(help="Env worker processes (default 2).")] = None,
    config: ConfigOption = None,
    settings_file: Annotated[
        Path | None,
        typer.Option(
            "--settings",
            help="The env_gateway settings as JSON, as a run writes them (env_gateway.settings.json); "
            "instead of --config. The service token comes from the environment.",
        ),
    ] = None,
) -> None:
    """Serve the env gateway (HTTP API + env worker pool) with uvicorn until interrupted."""
    settings = gateway_settings(config, settings_file, {"host": host, "port": port, "workers": workers})
    token = settings_with(config, ("security",)).security.resolved_service_token()
    from services.env_gateway.main import serve
    from services.parent_watch import watch_parent

    watch_parent()
    serve(settings, token)


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
    from services.parent_watch import watch_parent
    from services.retrieval_server.app import serve

    watch_parent()
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

    token = settings.security.resolved_service_token()
    serve_webshop(settings.env_gateway.webshop, settings.env_gateway.resolved_cache_dir(), token)


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
