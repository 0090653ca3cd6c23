"""`turnopd scale POOL N`: resize a pool of the live run while training goes on."""

from typing import Annotated

import typer

from services.contracts.operations import SCALABLE, scale_service
from services.errors import InputError, TurnOPDError


def scale(
    pool: Annotated[
        str,
        typer.Argument(help=f"One of: {', '.join(SCALABLE)}, or teacher-<name> (a multi-teacher run's app)."),
    ],
    replicas: Annotated[int, typer.Argument(help="How many workers (rollout) or replicas (teacher).")],
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the change to finish.")] = 900.0,
) -> None:
    """Grow or shrink POOL to N; no step is lost or repeated, a new worker plays only with the
    current weights, and a worker taken away finishes the chunk it plays first."""
    try:
        scale_service(pool, replicas)  # before joining a cluster: bad input fails at once
    except ValueError as exc:
        raise InputError(str(exc)) from None
    from services.operations.run_client import submit_scale, wait_restart
    from services.ray_session import join_cluster

    join_cluster()
    result = wait_restart(submit_scale(pool, replicas), timeout)
    if not result.ok:
        raise TurnOPDError(f"scaling {pool} to {replicas} failed: {result.message}")
    typer.echo(f"{pool}: {result.message} ({result.seconds:.1f} s, after step {result.step})")
