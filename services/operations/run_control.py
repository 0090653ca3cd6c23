"""The `run-control` actor: the live status of a `turnopd train` run and its queue of restart requests.

The driver creates it (namespace `turnopd`, not detached: it dies with the run, so "no
`run-control` actor" means "no run is live"), publishes a ``RunStatus`` after every step and
every restart, and takes ``RestartRequest``s from it; `turnopd status` reads the status and
`turnopd restart` files a request and waits for its ``RestartResult``. Only one run per Ray
cluster: a second `turnopd train` finds the name taken and stops with a clear error.
"""

from collections import deque
from typing import Any

import ray

from services.contracts.operations import RestartRequest, RestartResult, RunStatus
from services.errors import ConflictError, NotFoundError
from services.ray_names import NAMESPACE
from services.ray_names import RUN_CONTROL_ACTOR as RUN_CONTROL_NAME
from services.ray_session import on_driver_node, wait_name_free

_KEPT_RESULTS = 200


class RunControl:
    """The actor's body in plain Python (unit-tested without Ray)."""

    def __init__(self) -> None:
        self._status: RunStatus | None = None
        self._queue: deque[RestartRequest] = deque()
        self._results: dict[str, RestartResult] = {}
        self._known: set[str] = set()
        self._closed = False

    def publish(self, status: RunStatus) -> None:
        self._status = status

    def status(self) -> RunStatus | None:
        return self._status

    def submit(self, request: RestartRequest) -> None:
        """Queue a restart; refused once the run stopped taking requests or for a reused id."""
        if self._closed:
            raise ConflictError("the run is finishing and takes no more restart requests")
        if request.request_id in self._known:
            raise ConflictError(f"restart request {request.request_id} was already filed")
        self._known.add(request.request_id)
        self._queue.append(request)

    def take(self) -> list[RestartRequest]:
        """Every queued request, oldest first (the driver's restart loop calls this)."""
        taken = list(self._queue)
        self._queue.clear()
        return taken

    def complete(self, result: RestartResult) -> None:
        """Record how a restart went: one filed here, or one the driver did unasked (its watchdog
        replacing a dead process) or that was filed before Ray restarted this actor."""
        self._known.add(result.request_id)
        self._results[result.request_id] = result
        while len(self._results) > _KEPT_RESULTS:
            self._results.pop(next(iter(self._results)))

    def result(self, request_id: str) -> RestartResult | None:
        """The outcome of a request, None while it is queued or running."""
        if request_id not in self._known:
            raise NotFoundError(f"no restart request {request_id}")
        return self._results.get(request_id)

    def close(self) -> list[RestartRequest]:
        """Stop taking requests; return the ones still queued (the driver answers them)."""
        self._closed = True
        return self.take()


# Ray restarts a killed run-control (and sends the driver's calls again): it holds only what the
# driver publishes again (the status, after the next step or restart) and requests it will be given.
@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
class RunControlActor:
    def __init__(self) -> None:
        self._body = RunControl()

    def publish(self, status: RunStatus) -> None:
        self._body.publish(status)

    def status(self) -> RunStatus | None:
        return self._body.status()

    def submit(self, request: RestartRequest) -> None:
        self._body.submit(request)

    def take(self) -> list[RestartRequest]:
        return self._body.take()

    def complete(self, result: RestartResult) -> None:
        self._body.complete(result)

    def result(self, request_id: str) -> RestartResult | None:
        return self._body.result(request_id)

    def close(self) -> list[RestartRequest]:
        return self._body.close()


def start_run_control() -> Any:
    """Create the named `run-control` actor; ConflictError if another run holds the name."""
    try:
        ray.get_actor(RUN_CONTROL_NAME, namespace=NAMESPACE)
    except ValueError:
        pass
    else:
        raise ConflictError(
            f"another `turnopd train` is live in this Ray cluster (actor {RUN_CONTROL_NAME!r} exists)"
        )
    handle = RunControlActor.options(  # type: ignore[attr-defined]
        name=RUN_CONTROL_NAME, namespace=NAMESPACE, **on_driver_node()
    ).remote()
    ray.get(handle.status.remote())
    return handle


def stop_run_control(handle: Any) -> None:
    """Kill the actor and wait until its name is free for the next run."""
    ray.kill(handle, no_restart=True)
    wait_name_free(RUN_CONTROL_NAME, NAMESPACE, 30.0)


def find_run_control() -> Any:
    """The live run's `run-control` actor; NotFoundError when no run is live."""
    try:
        return ray.get_actor(RUN_CONTROL_NAME, namespace=NAMESPACE)
    except ValueError:
        raise NotFoundError(
            "no `turnopd train` run is live in this Ray cluster (no run-control actor in namespace turnopd)"
        ) from None
