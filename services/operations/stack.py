"""Bring up (and tear down) every service a training run talks to, on the embedded default or a cluster.

Order: Ray, Redis (``REDIS_URL`` / ``[controller] redis_url``, else an embedded redis-server in the
run directory; a non-loopback URL needs a password), the `controller` actor, the env gateway
(``[env_gateway] url`` / ``TURNOPD_ENV_GATEWAY_URL``, else a local gateway process on
``[env_gateway] port``, 0: any free port), the `teacher` Serve app, the rollout pool, the learner.
Each is a ``ManagedService`` (``services.operations.managed_service``, one module per service); they start together, each once
what it needs is up (the controller and the gateway after Redis, the pool after its gateway:
``Services.start_needs``), and stop together at the run's end, each once what needed it is down.

The ``Stack`` is what the step pipeline sees: handles that stay valid for the whole run, whatever
`turnopd restart` replaces behind them, and the services themselves for operations.
"""

import logging
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import ray

from services.operations.controller_client import ControllerClient
from services.operations.learner_handle import LearnerHandle
from services.operations.managed_service import ManagedService, RunContext, started
from services.operations.run_pieces import RunPieces
from services.operations.run_services import Services
from services.operations.start_together import start_together, stop_together
from services.ray_names import teacher_app
from services.ray_session import ensure_ray
from services.rollout_worker.pool import RolloutPool
from services.run_dir import RunDir
from services.settings.models import ModelsSettings
from services.settings.tree import TurnOPDSettings
from services.teacher_scorer.endpoint_client import EndpointTeacherClient
from services.teacher_scorer.handle_client import TeacherHandleClient

log = logging.getLogger(__name__)

# The client a run scores through: its teacher Serve app's handle, or an OpenAI-compatible endpoint.
RunTeacher = TeacherHandleClient | EndpointTeacherClient


@dataclass(frozen=True)
class Stack:
    models: ModelsSettings  # the student's first weights (a rewind to step 0); the rest of the settings stay with the caller
    run: RunDir
    run_id: str
    controller: ControllerClient  # follows a controller replacement
    pool: RolloutPool  # follows worker replacements and a gateway switch
    # the run's teacher app, or each source's by env (a multi-environment run); Serve's handles
    # follow a redeploy
    teacher: (
        TeacherHandleClient | EndpointTeacherClient | dict[str, TeacherHandleClient | EndpointTeacherClient]
    )
    learner: LearnerHandle  # follows a learner replacement
    services: Services


def logical_cpus_needed(settings: TurnOPDSettings) -> float:
    """Logical CPUs the actors reserve; a local Ray is given at least this many (oversubscribing cores)."""
    c = settings.cluster
    # one per teacher of a multi-environment run; none for a teacher that is an endpoint
    teacher_apps = sum(not t.teacher.endpoint_url for t in settings.for_teachers())
    return (
        c.rollout_workers * settings.rollout_worker.num_cpus
        + teacher_apps
        * settings.teacher.num_cpus
        * max(settings.teacher.replicas, settings.teacher.min_replicas)
        + c.learner_workers * settings.learner.num_cpus_per_worker
    )


def connect_ray(settings: TurnOPDSettings, stack: ExitStack) -> None:
    """Join ``RAY_ADDRESS``'s cluster, or start a local one big enough for the actors (once)."""
    if ensure_ray(logical_cpus_needed(settings)):
        stack.callback(ray.shutdown)


def start_stack(settings: TurnOPDSettings, run: RunDir, exits: ExitStack) -> Stack:
    """Start every service, each as soon as what it needs is up; ``exits`` stops them, each once what
    needs it is down (a failed start-up stops whatever had come up)."""
    connect_ray(settings, exits)
    run_id = settings.run.run_id or run.root.resolve().name
    services = Services.of(RunContext(pieces=RunPieces.of(settings), run=run, run_id=run_id))
    order, needs = services.in_start_order(), services.start_needs()
    exits.callback(stop_together, order, lambda s: s.stop(), needs, _kind)  # never started: stops nothing
    start_together(order, _start_timed, needs, _kind)
    return Stack(
        models=settings.models,
        run=run,
        run_id=run_id,
        controller=started(services.controller.client, "controller"),
        pool=started(services.pool.pool, "rollout pool"),
        teacher=teacher_clients(services, settings),
        learner=started(services.learner.handle, "learner"),
        services=services,
    )


def _kind(service: ManagedService[Any]) -> str:
    return service.kind


def _start_timed(service: ManagedService[Any]) -> None:
    began = time.monotonic()
    service.start()
    log.info("%s up in %.1f s", service.kind, time.monotonic() - began)


def teacher_clients(services: Services, settings: TurnOPDSettings) -> RunTeacher | dict[str, RunTeacher]:
    """The run's teacher client, or each source's by env (a multi-environment run)."""
    if not settings.sources:
        return services.teachers[0].handle
    by_app = {t.settings.app: t.handle for t in services.teachers}
    return {s.env: by_app[teacher_app(s.teacher)] for s in settings.task_sources()}
