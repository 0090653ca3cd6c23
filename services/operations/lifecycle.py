"""The services of a live run behind one lifecycle interface: replace (a fresh process, optionally
with new settings), scale, and health (their rows of `turnopd status`).

The stack starts them and stops them at the run's end, in order, on one ``ExitStack``
(``services.operations.stack.start_stack``); each ``ManagedService`` here
then owns what operating it needs: the settings it runs with now, how to replace it so that
training never stops, skips or repeats an optimizer step (``services.operations.restarts`` states
the rule for each), and how to report it. ``ServiceRestarts`` dispatches `turnopd restart` and
`turnopd scale` to them; ``LiveRun`` asks them for `turnopd status`.
"""

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import ClassVar, Generic, TypeVar

import ray

from services.cluster_capacity import check_free_resources
from services.contracts.operations import ServiceStatus
from services.controller.actor import start_controller
from services.env_gateway.local_server import LocalGateway
from services.errors import ConflictError, InputError, TurnOPDError
from services.learner.service import Learner
from services.operations.restart_rules import start_or_restore
from services.operations.stack import Stack, deploy_teacher
from services.ray_names import CONTROLLER_ACTOR, NAMESPACE, TEACHER_APP
from services.ray_session import wait_name_free
from services.rollout_worker.actor import worker_name
from services.settings.per_service import (
    ControllerServiceSettings,
    EnvGatewayServiceSettings,
    LearnerServiceSettings,
    RedisServiceSettings,
    RolloutWorkerServiceSettings,
    ServiceSettings,
    TeacherServiceSettings,
)
from services.settings.teacher import TeacherSettings
from services.settings.tree import TurnOPDSettings
from services.teacher_scorer.placement import replica_resources

S = TypeVar("S", bound=ServiceSettings)


class ResumeMismatchError(RuntimeError):
    """A replaced learner did not resume at the completed step: going on would skip or repeat steps."""


def masked_url(url: str) -> str:
    """A Redis URL without its password."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    return f"{scheme}{sep}***@{rest.rsplit('@', 1)[1]}"


def replicas_text(teacher: TeacherSettings) -> str:
    if teacher.autoscaling:
        return f"{teacher.min_replicas}-{teacher.max_replicas} replicas (autoscaling)"
    return f"{teacher.replicas} replica(s)"


@dataclass(frozen=True)
class Change:
    """What a restart brings: the settings of a new config file (None: none given) and that file
    (the env gateway's process reads it itself)."""

    run: TurnOPDSettings | None = None
    config_path: Path | None = None


class ManagedService(ABC, Generic[S]):
    """One service of the run, holding its own settings object (``S``: what it runs with now).
    ``kind`` names it in `turnopd restart`; ``counts`` is the run's restart count per service name."""

    kind: ClassVar[str]

    def __init__(self, stack: Stack, counts: Counter[str]) -> None:
        self.stack = stack
        self.counts = counts
        self.settings: S = self.compose(stack.settings)

    @staticmethod
    @abstractmethod
    def compose(run: TurnOPDSettings) -> S:
        """Its settings object, composed from a run's settings tree."""

    def restarted(self, change: Change, current: S | None = None) -> S | None:
        """``current`` (default: what it runs with now) with what a restart may change taken from the
        change's config; None: no config given. A config for a service that takes nothing from one
        is an error, not silently ignored."""
        if change.run is None:
            return None
        current = current if current is not None else self.settings
        if not current.RESTARTABLE:
            raise InputError(
                f"{self.kind} takes nothing from a new config: every setting it has defines the run; "
                "restart it without --config"
            )
        return current.restarted(self.compose(change.run))

    def version(self) -> str:
        """Fingerprint of the settings it runs with now."""
        return self.settings.fingerprint()

    @abstractmethod
    def replace(self, change: Change, step: int) -> str:
        """A fresh process in its place (with the change's settings if any), training going on, ``step``
        steps done; what happened, in one line. A failure with new settings brings it back as it
        was, then raises."""

    def scale(self, size: int) -> str:
        raise ConflictError(
            f"{self.kind} has no replicas to scale; `turnopd scale` takes rollout-pool or teacher"
        )

    @abstractmethod
    def status(self, step: int) -> list[ServiceStatus]:
        """Its rows of `turnopd status` (the driver's view; the CLI adds its own pings)."""


class RolloutPoolOps(ManagedService[RolloutWorkerServiceSettings]):
    """The pool's workers; each holds its own settings (``RolloutPool.worker_settings``)."""

    kind = "rollout-worker"

    @staticmethod
    def compose(run: TurnOPDSettings) -> RolloutWorkerServiceSettings:
        return run.for_rollout_worker()

    def replace(self, change: Change, step: int) -> str:
        """``rollout-pool``: every worker, one after the other."""
        return "; ".join(self.replace_worker(i, change) for i in range(self.stack.pool.size))

    def replace_worker(self, index: int, change: Change) -> str:
        pool = self.stack.pool
        old = pool.worker_settings(index)
        start_or_restore(lambda s: pool.replace_worker(index, s), self.restarted(change, old), old)
        self.counts[worker_name(index)] += 1
        return f"{worker_name(index)} replaced at weights version {pool.weights_version}"

    def worker_version(self, index: int) -> str:
        return self.stack.pool.worker_settings(index).fingerprint()

    def scale(self, size: int) -> str:
        """Resize in place (no restart, so no restart is counted)."""
        pool = self.stack.pool
        before = pool.resize(size)
        return f"rollout pool {before} -> {size} workers at weights version {pool.weights_version}"

    def status(self, step: int) -> list[ServiceStatus]:
        pool = self.stack.pool
        live = set(pool.live_workers)
        rows = []
        for i in range(pool.size):
            name = worker_name(i)
            rows.append(
                ServiceStatus(
                    name=name,
                    health="ok" if name in live else "down",
                    restarts=pool.stats.replacements_by_worker[i] + pool.stats.crashes_by_worker[i],
                    version=f"weights {pool.weights_version}, config {self.worker_version(i)}",
                    detail=f"{pool.stats.crashes_by_worker[i]} crash(es) recovered",
                )
            )
        return rows


class TeacherOps(ManagedService[TeacherServiceSettings]):
    kind = "teacher"

    @staticmethod
    def compose(run: TurnOPDSettings) -> TeacherServiceSettings:
        return run.for_teacher()

    @property
    def replicas(self) -> int:
        """Replicas set by hand; 0 while Serve autoscales them."""
        teacher = self.settings.teacher
        return 0 if teacher.autoscaling else teacher.replicas

    def replace(self, change: Change, step: int) -> str:
        self.settings = start_or_restore(deploy_teacher, self.restarted(change), self.settings)
        self.counts[self.kind] += 1
        return "teacher redeployed (new replicas, old ones drained)"

    def scale(self, size: int) -> str:
        teacher = self.settings.teacher
        if teacher.autoscaling:
            raise ConflictError(
                f"the teacher autoscales between {teacher.min_replicas} and {teacher.max_replicas} replicas; "
                "change [teacher] min_replicas/max_replicas with `turnopd restart teacher --config`"
            )
        before = teacher.replicas
        if size > before:
            check_free_resources(
                ray.available_resources(), replica_resources(teacher), size - before, "teacher replica"
            )
        resized = teacher.model_validate({**teacher.model_dump(), "replicas": size})
        new = self.settings.model_copy(update={"teacher": resized})
        deploy_teacher(new)  # a new deploy: Serve's rolling update replaces the replicas
        self.settings = new
        return f"teacher {before} -> {size} replicas"

    def status(self, step: int) -> list[ServiceStatus]:
        teacher = self.settings.teacher
        model = teacher.model or self.settings.default_model
        return [
            ServiceStatus(
                name="teacher",
                health="ok",
                restarts=self.counts["teacher"],
                version=f"{PurePath(model).name}, config {self.version()}",
                detail=f"Serve app '{TEACHER_APP}', {replicas_text(teacher)}",
            )
        ]


class EnvGatewayOps(ManagedService[EnvGatewayServiceSettings]):
    kind = "env-gateway"

    @staticmethod
    def compose(run: TurnOPDSettings) -> EnvGatewayServiceSettings:
        return run.for_env_gateway()

    def replace(self, change: Change, step: int) -> str:
        """A new gateway process on a new port; the pool plays every later request against it, then
        the old one stops. It reads the config file itself."""
        stack = self.stack
        if stack.gateway is None:
            raise ConflictError(
                f"the env gateway at {stack.env_url} was not started by this run; restart it where it runs"
            )
        config_path = change.config_path
        count = self.counts[self.kind] + 1
        config = config_path if config_path is not None else stack.config_file
        fresh = LocalGateway(config, log_path=stack.run.path(f"env_gateway.{count}.log")).start()
        stack.exits.callback(fresh.stop)
        old = stack.gateway
        stack.pool.switch_env_gateway(fresh.url)
        stack.gateway, stack.env_url = fresh, fresh.url
        old.stop()
        self.settings = self.restarted(change) or self.settings
        self.counts[self.kind] += 1
        return f"env gateway replaced: {old.url} -> {fresh.url}"

    def status(self, step: int) -> list[ServiceStatus]:
        stack = self.stack
        return [
            ServiceStatus(
                name="env-gateway",
                health="ok",
                restarts=self.counts[self.kind],
                version=f"config {self.version()}",
                address=stack.env_url,
                detail="local process" if stack.gateway is not None else "external",
            )
        ]


class ControllerOps(ManagedService[ControllerServiceSettings]):
    kind = "controller"

    @staticmethod
    def compose(run: TurnOPDSettings) -> ControllerServiceSettings:
        return run.for_controller()

    def replace(self, change: Change, step: int) -> str:
        """Killed for good; a fresh actor loads the state from Redis; a call in flight is sent again."""
        stack = self.stack
        self.restarted(change)  # refuses a config: the controller's settings all define the run
        ray.kill(stack.controller.handle, no_restart=True)
        if not wait_name_free(CONTROLLER_ACTOR, NAMESPACE, 60.0):
            raise TurnOPDError("the old controller's name is still taken after 60 s")
        stack.controller.replace(start_controller(stack.settings, stack.run_id, stack.redis_url))
        self.counts[self.kind] += 1
        state = stack.controller.handle.snapshot.remote()
        return f"controller replaced; resumed from Redis at step {ray.get(state).depth.step}"

    def status(self, step: int) -> list[ServiceStatus]:
        return [
            ServiceStatus(
                name="controller",
                health="ok",
                restarts=self.counts[self.kind],
                version=f"config {self.version()}",
                detail="state in Redis",
            )
        ]


class LearnerOps(ManagedService[LearnerServiceSettings]):
    kind = "learner"

    @staticmethod
    def compose(run: TurnOPDSettings) -> LearnerServiceSettings:
        return run.for_learner()

    def __init__(self, stack: Stack, counts: Counter[str]) -> None:
        super().__init__(stack, counts)
        # Run before a learner closes (after the pool's own copy): each copies the weights the old
        # learner put that it still holds.
        self.keep_weights: list[Callable[[], None]] = []

    def replace(self, change: Change, step: int) -> str:
        """Only between steps (the driver's thread): checkpoint, close, resume in a new trainer."""
        stack = self.stack
        new = self.restarted(change)  # before anything stops: a config it cannot take is refused here
        if step > 0:
            stack.learner.checkpoint(step)
        for keep in [stack.pool.own_weights, *self.keep_weights]:
            keep()
        stack.learner.close()
        self.settings = start_or_restore(lambda s: self._start(s, step), new, self.settings)
        self.counts[self.kind] += 1
        return f"learner replaced; resumed from the checkpoint of step {step}"

    def _start(self, settings: LearnerServiceSettings, step: int) -> None:
        learner = Learner(settings, self.stack.run.root, self.stack.student_dir)
        self.stack.exits.callback(learner.close)
        self.stack.learner = learner
        if learner.resumed_step != step:
            raise ResumeMismatchError(
                f"the new learner resumed at step {learner.resumed_step}, not at the completed step {step}"
            )

    def status(self, step: int) -> list[ServiceStatus]:
        learner = self.stack.learner
        return [
            ServiceStatus(
                name="learner",
                health="ok" if learner.alive else "down",
                restarts=self.counts[self.kind],
                version=f"step {step}, config {self.version()}",
                detail=f"Ray Train, {learner.world} worker(s)",
            )
        ]


class RedisOps(ManagedService[RedisServiceSettings]):
    kind = "redis"

    @staticmethod
    def compose(run: TurnOPDSettings) -> RedisServiceSettings:
        return run.for_redis()

    def replace(self, change: Change, step: int) -> str:
        """The embedded server only: stopped and started again on the same port and append-only file."""
        server = self.stack.redis
        if server is None:
            raise ConflictError(
                "Redis is external to this run ([controller] redis_url or REDIS_URL); restart it where it runs"
            )
        new = self.restarted(change) or self.settings
        server.restart(new.controller.redis_start_timeout_s)
        self.settings = new
        self.counts[self.kind] += 1
        return f"redis-server restarted on port {server.port} from its append-only file"

    def status(self, step: int) -> list[ServiceStatus]:
        stack = self.stack
        return [
            ServiceStatus(
                name="redis",
                health="ok",
                restarts=self.counts[self.kind],
                version="append-only file" if stack.redis is not None else "external",
                address=masked_url(stack.redis_url),
                detail="embedded redis-server" if stack.redis is not None else "external",
            )
        ]
