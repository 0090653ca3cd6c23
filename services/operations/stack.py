"""Bring up (and tear down) every service a training run talks to, on the embedded default or a cluster.

Order: Ray, Redis (``REDIS_URL`` / ``[controller] redis_url``, else an embedded redis-server in the
run directory; a non-loopback URL needs a password), the `controller` actor, the env gateway
(``[env_gateway] url`` / ``TURNOPD_ENV_GATEWAY_URL``, else a local gateway process on ``[env_gateway] port``, 0: any free
port), the `teacher` Serve app, the rollout pool, the learner.

The ``Stack`` is mutable: `turnopd restart` (``services.operations.restarts``) swaps a service for
a new one in place and registers the new one's closer on the same ``ExitStack``; closers of
replaced services are no-ops by then.
"""

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import ray
from ray import serve

from services.controller.actor import start_controller
from services.controller.embedded_redis import EmbeddedRedis
from services.env_gateway.local_server import LocalGateway
from services.learner.service import Learner
from services.models.registry import resolve_model_dir
from services.operations.controller_client import ControllerClient
from services.ray_names import TEACHER_APP as APP_NAME
from services.ray_session import ensure_ray
from services.rollout_worker.pool import RolloutPool
from services.run_dir import RunDir
from services.settings.per_service import TeacherServiceSettings
from services.settings.tree import TurnOPDSettings
from services.teacher_scorer.handle_client import TeacherHandleClient
from services.teacher_scorer.serve_app import teacher_application


@dataclass
class Stack:
    settings: TurnOPDSettings
    run: RunDir
    config_file: Path | None
    exits: ExitStack
    run_id: str
    controller: ControllerClient
    pool: RolloutPool
    teacher: TeacherHandleClient
    learner: Learner
    student_dir: Path
    env_url: str
    redis_url: str
    gateway: LocalGateway | None  # None: an external gateway ([env_gateway] url) this run does not own
    redis: EmbeddedRedis | None  # None: an external Redis ([controller] redis_url / REDIS_URL)


def logical_cpus_needed(settings: TurnOPDSettings) -> float:
    """Logical CPUs the actors reserve; a local Ray is given at least this many (oversubscribing cores)."""
    c = settings.cluster
    return (
        c.rollout_workers * settings.rollout_worker.num_cpus
        + settings.teacher.num_cpus * max(settings.teacher.replicas, settings.teacher.min_replicas)
        + c.learner_workers * settings.learner.num_cpus_per_worker
    )


def _redis(settings: TurnOPDSettings, run: RunDir, stack: ExitStack) -> tuple[str, EmbeddedRedis | None]:
    url = settings.controller.resolved_redis_url()
    if url:
        return url, None
    password = settings.controller.redis_password
    server = EmbeddedRedis(
        settings.controller.embedded_redis_dir or run.redis_dir,
        password=password.get_secret_value() if password else None,
    )
    stack.callback(server.stop)
    return server.start(settings.controller.redis_start_timeout_s), server


def deploy_teacher(settings: TeacherServiceSettings) -> None:
    """Deploy (or redeploy, rolling) the `teacher` Serve app; an unset ``[teacher] model`` means the
    run's ``[models] teacher``."""
    teacher = settings.teacher
    if not teacher.model:
        model = resolve_model_dir(settings.default_model, settings.cache_dir)
        teacher = teacher.model_copy(update={"model": str(model)})
    token = settings.service_token.get_secret_value() if settings.service_token is not None else None
    serve.run(teacher_application(teacher, settings.top_k, token), name=APP_NAME, route_prefix=f"/{APP_NAME}")


def connect_ray(settings: TurnOPDSettings, stack: ExitStack) -> None:
    """Join ``RAY_ADDRESS``'s cluster, or start a local one big enough for the actors (once)."""
    if ensure_ray(logical_cpus_needed(settings)):
        stack.callback(ray.shutdown)


def start_stack(settings: TurnOPDSettings, run: RunDir, config_file: Path | None, stack: ExitStack) -> Stack:
    """Start every service; ``stack`` closes them in reverse order."""
    connect_ray(settings, stack)
    redis_url, redis_server = _redis(settings, run, stack)
    run_id = settings.run.run_id or run.root.resolve().name
    controller = ControllerClient(start_controller(settings, run_id, redis_url))
    stack.callback(controller.kill)
    env_url = settings.env_gateway.resolved_url()
    gateway = None
    if env_url is None:
        gateway = stack.enter_context(
            LocalGateway(config_file, log_path=run.path("env_gateway.log"), port=settings.env_gateway.port)
        )
        env_url = gateway.url
    deploy_teacher(settings.for_teacher())
    stack.callback(serve.delete, APP_NAME)
    pool = RolloutPool(settings, env_url, settings.models.student)
    stack.callback(pool.close)
    student_dir = resolve_model_dir(settings.models.student, settings.models.cache_dir)
    learner = Learner(settings.for_learner(), run.root, student_dir)
    stack.callback(learner.close)
    return Stack(
        settings=settings,
        run=run,
        config_file=config_file,
        exits=stack,
        run_id=run_id,
        controller=controller,
        pool=pool,
        teacher=TeacherHandleClient(),
        learner=learner,
        student_dir=student_dir,
        env_url=env_url,
        redis_url=redis_url,
        gateway=gateway,
        redis=redis_server,
    )
