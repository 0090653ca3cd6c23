"""The names operators and tools rely on, in one place: the Ray namespace, the named actors and
the Serve apps (docs/architecture.md lists them). No Ray import: anything may read them."""

NAMESPACE = "turnopd"  # every named actor of a run lives here

CONTROLLER_ACTOR = "controller"
RUN_CONTROL_ACTOR = "run-control"  # serves `turnopd status` and `turnopd restart` for a live run
ROLLOUT_POOL = "rollout-pool"  # the pool's name in logs and task chunk ids (not an actor)

TEACHER_APP = "teacher"  # Serve app, route prefix /teacher
TEACHER_DEPLOYMENT = "TeacherScorer"
ENV_GATEWAY_APP = "env-gateway"  # Serve app of the env gateway when it runs under Serve


def rollout_worker_actor(index: int) -> str:
    """The name of rollout worker ``index``'s actor: ``rollout-worker-{index}``."""
    return f"rollout-worker-{index}"
