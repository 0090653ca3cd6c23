"""`turnopd restart SERVICE`: replace one service of a live run with a fresh process while training goes on.

Training never stops, skips or repeats an optimizer step:

* ``rollout-worker-{i}``: the actor is killed for good and a fresh one takes its name at the
  published weights; the chunk it was playing fails and the pool plays it again on the new actor
  with the same seeds. ``rollout-pool`` does this for every worker, one after the other.
* ``teacher``: the Serve app is deployed again (Serve gives every deploy a new version, so it
  starts new replicas and drains the old ones); scoring in flight finishes on the draining replica
  or is sent again by the handle client.
* ``env-gateway`` (the local gateway this run started): a new gateway process comes up on a new
  port, the pool plays every later request against it, then the old one stops; chunks that lose
  episodes with it are played again whole.
* ``controller``: killed for good, and a fresh actor loads the state from Redis; a call in flight
  is sent again to it (``plan`` is pure, ``ingest`` of a stored step returns the stored decision).
* ``learner``: stateful, so it is replaced at a step boundary by the driver's own thread: the
  completed step is checkpointed, the trainer closed, and a new one resumes from that checkpoint
  (it must report the same step, else the run stops). The pool already holds those weights;
  before the old trainer goes, the weights its rank 0 put in the object store that are still
  needed (the pool's; with ``[pipeline] max_staleness`` >= 1, versions not yet published) are
  copied into objects the driver owns (``LearnerHandle.keep_before_close``).
* ``redis`` (the embedded server only): stopped and started again on the same port and
  append-only file; the controller's commands reconnect and a transaction cut off is run again.

With ``--config FILE`` a service takes from the file only what its own settings type lets a
restart change (``services.settings.per_service``: ``RESTARTABLE``); the controller's settings all
define the run, so a controller restart refuses a config. A restart that fails to start the new
process with a new config brings the service back with the settings it had, and reports the
failure. Since a replacement stops the old process first, a failed restart without a config is
started once more with the same settings; a learner that cannot be started even so stops the run
(``LearnerLostError``), as training cannot go on without one.
"""

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.contracts.operations import RestartRequest, RestartResult, ServiceStatus
from services.errors import InputError
from services.operations.managed_service import Change, ManagedService, RunBrokenError
from services.operations.restart_rules import RESTART_ERRORS, service_kind, worker_index
from services.operations.run_pieces import RunPieces
from services.operations.run_services import Services
from services.settings import load_settings

log = logging.getLogger(__name__)


class ServiceRestarts:
    """`turnopd restart` and `turnopd scale` for a run's ``Services``, with the restart counts and
    history `turnopd status` shows."""

    def __init__(self, services: Services) -> None:
        self.pool = services.pool
        self.counts = services.counts
        self.services = services.by_kind()  # in the order `turnopd status` lists them
        self.history: list[RestartResult] = []
        self.in_progress: RestartRequest | None = None  # the restart being carried out now

    def status(self, step: int) -> list[ServiceStatus]:
        """Every service's rows of `turnopd status`, ``step`` steps done; the rows of a restart being
        carried out say ``restarting`` (its old process may already be gone, its new one not yet in)."""
        rows = [row for service in self.services.values() for row in service.status(step)]
        request = self.in_progress
        if request is None or request.replicas is not None:
            return rows
        return [_restarting(row, request) if _restarted_by(row.name, request) else row for row in rows]

    def run(
        self, request: RestartRequest, step: int, on_start: Callable[[], None] = lambda: None
    ) -> RestartResult:
        """Carry out ``request`` with ``step`` steps done; failures come back as a result with ``ok=False``.
        ``on_start`` is called once its rows read ``restarting`` (the driver publishes them).

        A learner restart must run between steps (``RestartLoop.at_step_boundary`` does so).
        """
        started_at, t0 = time.time(), time.perf_counter()
        self.in_progress = request
        on_start()
        try:
            service = self._service(request.service)
            if request.replicas is not None:
                message = service.scale(request.replicas)
            else:
                message = self._restart(service, request.service, request.config_path, step)
            ok = True
        except RunBrokenError:  # the run cannot go on correctly: it stops, with a --resume hint
            raise
        except RESTART_ERRORS as exc:  # the operator's boundary: report the failure, train on
            log.exception("restart of %s failed", request.service)
            message, ok = f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}", False
        finally:
            self.in_progress = None
        result = RestartResult(
            request_id=request.request_id,
            service=request.service,
            ok=ok,
            message=message,
            started_at=started_at,
            seconds=time.perf_counter() - t0,
            step=step,
        )
        self.history.append(result)
        return result

    def _service(self, name: str) -> ManagedService[Any]:
        kind = service_kind(name)
        if kind not in self.services:
            raise InputError(f"this run has no service {name!r}; it has {', '.join(self.services)}")
        return self.services[kind]

    def _restart(self, service: ManagedService[Any], name: str, config_path: str | None, step: int) -> str:
        path = Path(config_path) if config_path is not None else None
        change = Change(RunPieces.of(load_settings(path)) if path is not None else None)
        index = worker_index(name)
        if index is not None:
            return self.pool.replace_worker(index, change)
        return service.replace(change, step)


def _restarted_by(row: str, request: RestartRequest) -> bool:
    """Whether the `turnopd status` row ``row`` is one ``request`` replaces."""
    if request.service == "rollout-pool":
        return row.startswith("rollout-worker-")
    return row == request.service or (request.service == "teacher" and row.startswith("teacher-"))


def _restarting(row: ServiceStatus, request: RestartRequest) -> ServiceStatus:
    return row.model_copy(
        update={"health": "restarting", "detail": f"restart {request.request_id} in progress"}
    )
