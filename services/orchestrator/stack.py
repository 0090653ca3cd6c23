"""Bring up (and tear down) every service a training run talks to, on the embedded default or a cluster.

Order: Ray, Redis (``REDIS_URL`` / ``[controller] redis_url``, else an embedded redis-server in the
run directory), the `controller` actor, the env gateway (``TURNOPD_ENV_GATEWAY_URL``, else a local
gateway process), the `teacher` Serve app, the rollout pool, the learner.
"""

import math
import os
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray import serve

from services.controller.actor import NAMESPACE, start_controller, stop_controller
from services.controller.embedded_redis import EmbeddedRedis
from services.env_gateway.local_server import LocalGateway
from services.learner.service import Learner
from services.models.registry import resolve_model_dir
from services.orchestrator.run_dir import RunDir
from services.rollout_worker.pool import RolloutPool
from services.settings.teacher import TeacherSettings
from services.settings.tree import TurnOPDSettings
from services.teacher_scorer.handle_client import TeacherHandleClient
from services.teacher_scorer.placement import APP_NAME
from services.teacher_scorer.serve_app import teacher_application


@dataclass
class Stack:
    controller: Any
    pool: RolloutPool
    teacher: TeacherHandleClient
    learner: Learner
    env_url: str
    redis_url: str


def logical_cpus_needed(settings: TurnOPDSettings) -> float:
    """Logical CPUs the actors reserve; a local Ray is given at least this many (oversubscribing cores)."""
    c = settings.cluster
    return (
        c.rollout_workers * settings.rollout_worker.num_cpus
        + settings.teacher.num_cpus * max(settings.teacher.replicas, settings.teacher.min_replicas)
        + c.learner_workers * settings.learner.num_cpus_per_worker
    )


def _redis_url(settings: TurnOPDSettings, run: RunDir, stack: ExitStack) -> str:
    url = settings.controller.redis_url or os.environ.get("REDIS_URL")
    if url:
        return url
    password = settings.controller.redis_password
    server = EmbeddedRedis(
        settings.controller.embedded_redis_dir or run.redis_dir,
        password=password.get_secret_value() if password else None,
    )
    stack.callback(server.stop)
    return server.start(settings.controller.redis_start_timeout_s)


def _teacher_settings(settings: TurnOPDSettings) -> TeacherSettings:
    """The scorer's settings; an unset ``teacher.model`` means the run's ``models.teacher``."""
    teacher = settings.teacher
    if teacher.model:
        return teacher
    model = str(resolve_model_dir(settings.models.teacher, settings.models.cache_dir))
    return teacher.model_copy(update={"model": model})


def start_stack(settings: TurnOPDSettings, run: RunDir, config_file: Path | None, stack: ExitStack) -> Stack:
    """Start every service; ``stack`` closes them in reverse order."""
    if not ray.is_initialized():
        local = "RAY_ADDRESS" not in os.environ
        cpus = max(os.cpu_count() or 1, math.ceil(logical_cpus_needed(settings))) if local else None
        ray.init(namespace=NAMESPACE, include_dashboard=False, log_to_driver=False, num_cpus=cpus)
        stack.callback(ray.shutdown)
    redis_url = _redis_url(settings, run, stack)
    run_id = settings.run.run_id or run.root.resolve().name
    controller = start_controller(settings, run_id, redis_url)
    stack.callback(stop_controller, controller)
    env_url = os.environ.get("TURNOPD_ENV_GATEWAY_URL", "")
    if not env_url:
        gateway = stack.enter_context(LocalGateway(config_file, log_path=run.path("env_gateway.log")))
        env_url = gateway.url
    serve.run(
        teacher_application(_teacher_settings(settings), settings.distill.distill_topk),
        name=APP_NAME,
        route_prefix=f"/{APP_NAME}",
    )
    stack.callback(serve.delete, APP_NAME)
    pool = RolloutPool(settings, env_url, settings.models.student)
    stack.callback(pool.close)
    student_dir = resolve_model_dir(settings.models.student, settings.models.cache_dir)
    learner = Learner(settings, run.root, student_dir)
    stack.callback(learner.close)
    return Stack(controller, pool, TeacherHandleClient(), learner, env_url, redis_url)
