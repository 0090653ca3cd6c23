"""The operator's side of a live run: read its status, file restart requests (after
``services.ray_session.join_cluster``).

`turnopd status` and `turnopd restart` are thin shells over these functions, and the chaos test
calls them too, so tests exercise exactly the path operators use.
"""

import time
import uuid
from pathlib import Path
from typing import Any

import ray

from services.contracts.operations import (
    RestartRequest,
    RestartResult,
    RunStatus,
    check_service_name,
    scale_service,
)
from services.errors import InputError, NotFoundError, TurnOPDError
from services.operations.run_control import find_run_control

_POLL_S = 0.5


def run_status(control: Any | None = None) -> RunStatus:
    """The status the live run published last; NotFoundError when no run is live."""
    control = control or find_run_control()
    status: RunStatus | None = ray.get(control.status.remote())
    if status is None:
        raise NotFoundError("the run is starting its services; no status yet")
    return status


def submit_restart(service: str, config_path: Path | None = None) -> str:
    """File a restart request with the live run; return its id."""
    try:
        check_service_name(service)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if config_path is not None and not config_path.is_file():
        raise InputError(f"config file {config_path} does not exist")
    control = find_run_control()
    status: RunStatus | None = ray.get(control.status.remote())
    workers = [s.name for s in status.services if s.name.startswith("rollout-worker-")] if status else []
    if service.startswith("rollout-worker-") and workers and service not in workers:
        raise InputError(f"the run has no {service}; its workers are {', '.join(workers)}")
    request = RestartRequest(
        request_id=uuid.uuid4().hex,
        service=service,
        config_path=str(config_path.resolve()) if config_path is not None else None,
    )
    ray.get(control.submit.remote(request))
    return request.request_id


def submit_scale(pool: str, replicas: int) -> str:
    """File a request to resize ``pool`` (rollout, teacher) of the live run to ``replicas``; its id."""
    try:
        service = scale_service(pool, replicas)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    request = RestartRequest(request_id=uuid.uuid4().hex, service=service, replicas=replicas)
    ray.get(find_run_control().submit.remote(request))
    return request.request_id


def restart_result(request_id: str) -> RestartResult | None:
    """The driver's answer to a restart request, None while it is queued or running."""
    result: RestartResult | None = ray.get(find_run_control().result.remote(request_id))
    return result


def wait_restart(request_id: str, timeout_s: float) -> RestartResult:
    """Wait for the driver's answer to a restart request."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = restart_result(request_id)
        if result is not None:
            return result
        time.sleep(_POLL_S)
    raise TurnOPDError(
        f"restart request {request_id} got no answer within {timeout_s:.0f} s; "
        "a learner restart waits for the end of the running step (see `turnopd status`)"
    )
