"""`turnopd restart SERVICE`: replace one service of the live run while training goes on."""

from pathlib import Path
from typing import Annotated

import typer

from services.contracts.operations import RESTARTABLE, check_service_name
from services.errors import InputError, TurnOPDError


def restart(
    service: Annotated[str, typer.Argument(help=f"One of: {', '.join(RESTARTABLE)}.")],
    config: Annotated[
        Path | None, typer.Option(help="TOML the new process starts with (its own sections only).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the restart to finish.")] = 900.0,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Wait for the outcome.")] = True,
) -> None:
    """Replace SERVICE with a fresh process; the run never stops, skips or repeats a step."""
    try:
        check_service_name(service)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    from services.operations.run_client import submit_restart, wait_restart
    from services.ray_session import join_cluster

    join_cluster()
    request_id = submit_restart(service, config)
    if not wait:
        typer.echo(f"restart of {service} filed as request {request_id}")
        return
    result = wait_restart(request_id, timeout)
    if not result.ok:
        raise TurnOPDError(f"restart of {service} failed: {result.message}")
    typer.echo(f"{service}: {result.message} ({result.seconds:.1f} s, after step {result.step})")
