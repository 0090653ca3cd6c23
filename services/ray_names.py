"""The names operators and tools rely on, in one place: the Ray namespace, the named actors and
the Serve apps (docs/architecture.md lists them). No Ray import: anything may read them."""

NAMESPACE = "turnopd"  # every named actor of a run lives here

CONTROLLER_ACTOR = "controller"
RUN_CONTROL_ACTOR = "run-control"  # serves `turnopd status` and `turnopd restart` for a live run
ROLLOUT_POOL = "rollout-pool"  # the pool's name in logs and task chunk ids (not an actor)

TEACHER_APP = "teacher"  # Serve app, route prefix /teacher (a multi-teacher run: teacher_app(name))
TEACHER_DEPLOYMENT = "TeacherScorer"
ENV_GATEWAY_APP = "env-gateway"  # Serve app of the env gateway when it runs under Serve


def rollout_worker_actor(index: int) -> str:
    """The name of rollout worker ``index``'s actor: ``rollout-worker-{index}``."""
    return f"rollout-worker-{index}"


def teacher_app(teacher: str | None = None) -> str:
    """The Serve app of a run's teacher: ``teacher`` for a single-teacher run (None), else
    ``teacher-<name>`` for the teacher named ``teacher`` (a zoo name, or a path's last part; a name
    that already starts with ``teacher-``, as the zoo's specialists do, is the app's name)."""
    if teacher is None:
        return TEACHER_APP
    name = teacher.rstrip("/").rsplit("/", 1)[-1]
    return name if name.startswith(f"{TEACHER_APP}-") else f"{TEACHER_APP}-{name}"
