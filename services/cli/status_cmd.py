"""`turnopd status`: the live run's step, H_hat, alpha, last eval, and every service's health."""

from typing import Annotated

import typer
from rich.console import Console

from services.cli.status_view import status_renderable


def status(
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of tables.")
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each service's ping.")] = 5.0,
) -> None:
    """Show the live `turnopd train` run of this Ray cluster (RAY_ADDRESS, else the local one)."""
    from services.ray_session import join_cluster

    join_cluster()  # before the probes' imports (Ray Serve's take 2.5 s): no cluster answers at once
    from services.operations.run_client import run_status
    from services.operations.service_probes import probe_services

    probed = probe_services(run_status(), timeout_s=timeout)
    if json_out:
        typer.echo(probed.model_dump_json())
    else:
        Console().print(status_renderable(probed))
