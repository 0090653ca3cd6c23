"""The services of a run behind one lifecycle interface: start, stop, replace (a fresh process,
optionally with new settings), scale, and health (their rows of `turnopd status`).

``services.operations.stack.start_stack`` starts them together (each once what it needs is up)
and stops them together at the run's end (each once what needs it is down); each
``ManagedService`` here owns its live process (the Redis server, the controller actor, the gateway,
the Serve app, the pool, the learner), the settings it runs with now, how to replace it so that
training never stops, skips or repeats an optimizer step (``services.operations.restarts`` states
the rule for each), and how to report it. The step pipeline sees only their handles, which stay
valid across a replacement (``Stack``).
"""

import asyncio
import logging
import os
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Generic, TypeVar

import ray
from ray import serve

from services.cluster_capacity import check_free_resources
from services.contracts.operations import ServiceStatus
from services.controller.actor import start_controller
from services.controller.embedded_redis import EmbeddedRedis
from services.env_gateway.local_server import LocalGateway
from services.errors import ConflictError, InputError
from services.learner.service import Learner
from services.models.loading import load_tokenizer
from services.models.registry import resolve_model_dir
from services.models.tokenizer_match import tokenizer_text
from services.operations.controller_client import ControllerClient
from services.operations.learner_handle import LearnerHandle
from services.operations.restart_rules import RESTART_ERRORS, start_or_restore
from services.operations.service_probes import ENDPOINT_DETAIL
from services.ray_names import CONTROLLER_ACTOR, NAMESPACE, teacher_app
from services.ray_session import free_name
from services.rollout_worker.actor import worker_name
from services.rollout_worker.pool import RolloutPool
from services.run_dir import DECISIONS_FILE, RunDir
from services.settings.per_service import (
    ControllersSettings,
    EnvGatewayServiceSettings,
    LearnerServiceSettings,
    RedisServiceSettings,
    RolloutWorkerServiceSettings,
    ServiceSettings,
    TeacherServiceSettings,
)
from services.settings.teacher import TeacherSettings
from services.settings.tree import TurnOPDSettings
from services.teacher_scorer.endpoint_client import EndpointTeacherClient, endpoint_client
from services.teacher_scorer.handle_client import TeacherHandleClient
from services.teacher_scorer.placement import replica_resources
from services.teacher_scorer.serve_app import teacher_application
from services.teacher_scorer.token_probe import StudentTokens, student_tokens

S = TypeVar("S", bound=ServiceSettings)
log = logging.getLogger(__name__)


class RunBrokenError(RuntimeError):
    """A restart left the run unable to go on correctly: it stops (resume from its checkpoint)."""


class ResumeMismatchError(RunBrokenError):
    """A replaced learner did not resume at the completed step: going on would skip or repeat steps."""


class LearnerLostError(RunBrokenError):
    """A learner restart failed and so did starting one with the old settings: no learner is left."""


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


def deploy_teacher(settings: TeacherServiceSettings) -> None:
    """Deploy (or redeploy, rolling) the `teacher` Serve app; an unset ``[teacher] model`` means the
    run's ``[models] teacher``."""
    teacher = settings.teacher
    if not teacher.model:
        model = resolve_model_dir(settings.default_model, settings.cache_dir)
        teacher = teacher.model_copy(update={"model": str(model)})
    token = settings.service_token.get_secret_value() if settings.service_token is not None else None
    app = settings.app
    serve.run(teacher_application(teacher, settings.top_k, token), name=app, route_prefix=f"/{app}")


@dataclass(frozen=True)
class RunContext:
    """What every service of a run knows: the run's settings (a resumed run's: those its config.json
    saved), directory and id."""

    settings: TurnOPDSettings
    run: RunDir
    run_id: str


@dataclass(frozen=True)
class Change:
    """What a restart brings: the settings of a new config file (None: none given)."""

    run: TurnOPDSettings | None = None


class ManagedService(ABC, Generic[S]):
    """One service of the run, holding its own settings object (``S``: what it runs with now) and,
    once started, its live process. ``kind`` names it in `turnopd restart`; ``counts`` is the run's
    restart count per service name."""

    kind: str

    def __init__(self, ctx: RunContext, counts: Counter[str]) -> None:
        self.ctx = ctx
        self.counts = counts
        self.settings: S = self.compose(ctx.settings)

    @abstractmethod
    def compose(self, run: TurnOPDSettings) -> S:
        """Its settings object, composed from a run's settings tree."""

    @abstractmethod
    def start(self) -> None:
        """Bring it up with its settings."""

    @abstractmethod
    def stop(self) -> None:
        """Stop what it runs now (nothing if it never started, or is not this run's)."""

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


class RedisOps(ManagedService[RedisServiceSettings]):
    """The controller's state store: an external Redis (``[controller] redis_url`` / ``REDIS_URL``)
    or an embedded redis-server in the run directory (a non-loopback URL needs a password)."""

    kind = "redis"
    url: str
    server: EmbeddedRedis | None = None  # None: an external Redis this run does not own

    def compose(self, run: TurnOPDSettings) -> RedisServiceSettings:
        return run.for_redis()

    def start(self) -> None:
        controller = self.settings.controller
        url = controller.resolved_redis_url()
        if url:
            self.url = url
            return
        password = controller.redis_password
        self.server = EmbeddedRedis(
            controller.embedded_redis_dir or self.ctx.run.redis_dir,
            password=password.get_secret_value() if password else None,
        )
        self.url = self.server.start(controller.redis_start_timeout_s)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def replace(self, change: Change, step: int) -> str:
        """The embedded server only: stopped and started again on the same port and append-only file."""
        server = self.server
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
        embedded = self.server is not None
        return [
            ServiceStatus(
                name="redis",
                health="ok",
                restarts=self.counts[self.kind],
                version="append-only file" if embedded else "external",
                address=masked_url(self.url),
                detail="embedded redis-server" if embedded else "external",
            )
        ]


class ControllerOps(ManagedService[ControllersSettings]):
    """The `controller` actor, its state in Redis; the pipeline calls it through ``client``."""

    kind = "controller"
    client: ControllerClient | None = None

    def __init__(self, ctx: RunContext, counts: Counter[str], redis: RedisOps) -> None:
        super().__init__(ctx, counts)
        self.redis = redis

    def compose(self, run: TurnOPDSettings) -> ControllersSettings:
        return run.for_controllers()

    def _actor(self) -> Any:
        decision_log = self.ctx.run.path(DECISIONS_FILE).resolve()  # what Redis loses is rebuilt from it
        return start_controller(self.ctx.settings, self.ctx.run_id, self.redis.url, decision_log)

    def start(self) -> None:
        self.client = ControllerClient(self._actor())

    def stop(self) -> None:
        if self.client is not None:
            self.client.kill()

    def replace(self, change: Change, step: int) -> str:
        """Killed for good; a fresh actor loads the state from Redis; a call in flight is sent again.

        This process creates the new actor and hands the client the creator's handle (the one
        reference that keeps it alive). A fresh actor that fails to come up is killed and tried
        once more: the old one is gone, so the run needs one (``start_or_restore``'s rule)."""
        self.restarted(change)  # refuses a config: the controller's settings all define the run
        client = started(self.client, self.kind)
        ray.kill(client.handle, no_restart=True)
        free_name(CONTROLLER_ACTOR, "the old controller")
        try:
            fresh = self._fresh_actor()
        except RESTART_ERRORS:
            log.exception("the new controller did not come up; trying once more")
            fresh = self._fresh_actor()  # a second failure is reported; calls wait for the next restart
        client.replace(fresh)
        self.counts[self.kind] += 1
        health = client.handle.health.remote()
        return f"controller replaced; resumed from Redis at step {ray.get(health).step}"

    def _fresh_actor(self) -> Any:
        """A new controller actor, or the error after killing what came up of it (so the name is free)."""
        try:
            return self._actor()
        except BaseException:
            with suppress(ValueError):  # ValueError: it never registered its name
                ray.kill(ray.get_actor(CONTROLLER_ACTOR, namespace=NAMESPACE), no_restart=True)
            free_name(CONTROLLER_ACTOR, "the failed controller")
            raise

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


class EnvGatewayOps(ManagedService[EnvGatewayServiceSettings]):
    """The env gateway: external (``[env_gateway] url`` / ``TURNOPD_ENV_GATEWAY_URL``), else a local
    gateway process on ``[env_gateway] port`` (0: any free port). Whoever plays against it follows
    its replacements (``on_switch``)."""

    kind = "env-gateway"
    url: str
    gateway: LocalGateway | None = None  # None: an external gateway this run does not own

    def __init__(self, ctx: RunContext, counts: Counter[str]) -> None:
        super().__init__(ctx, counts)
        self._followers: list[Callable[[str], None]] = []

    def compose(self, run: TurnOPDSettings) -> EnvGatewayServiceSettings:
        return run.for_env_gateway()

    def on_switch(self, follow: Callable[[str], None]) -> None:
        """``follow(url)`` is told the new gateway's URL before the old one stops."""
        self._followers.append(follow)

    def start(self) -> None:
        url = self.settings.env_gateway.resolved_url()
        if url is not None:
            self.url = url
            return
        log_path = self.ctx.run.path("env_gateway.log")
        port = self.settings.env_gateway.port
        self.gateway = LocalGateway(settings=self.settings, log_path=log_path, port=port)
        self.url = self.gateway.start().url

    def stop(self) -> None:
        if self.gateway is not None:
            self.gateway.stop()

    def replace(self, change: Change, step: int) -> str:
        """A new gateway process on a new port; the pool plays every later request against it, then
        the old one stops. It runs with the settings it has now, or with those a restart takes from
        a new config (``restarted``)."""
        old = self.gateway
        if old is None:
            raise ConflictError(
                f"the env gateway at {self.url} was not started by this run; restart it where it runs"
            )
        settings = self.restarted(change) or self.settings
        count = self.counts[self.kind] + 1
        log_path = self.ctx.run.path(f"env_gateway.{count}.log")
        fresh = LocalGateway(settings=settings, log_path=log_path).start()
        for follow in self._followers:
            follow(fresh.url)
        self.gateway, self.url = fresh, fresh.url
        old.stop()
        self.settings = settings
        self.counts[self.kind] += 1
        return f"env gateway replaced: {old.url} -> {fresh.url}"

    def status(self, step: int) -> list[ServiceStatus]:
        return [
            ServiceStatus(
                name="env-gateway",
                health="ok",
                restarts=self.counts[self.kind],
                version=f"config {self.version()}",
                address=self.url,
                detail="local process" if self.gateway is not None else "external",
            )
        ]


class TeacherOps(ManagedService[TeacherServiceSettings]):
    """A teacher Serve app (`teacher`; in a multi-environment run `teacher-<name>`, one per source's
    teacher: ``env``); the pipeline scores through ``handle`` (Serve's handle follows redeploys).
    With ``[teacher] endpoint_url`` (a source's ``endpoint_url`` in a multi-environment run) no app is
    deployed: ``handle`` scores on that server, which the run neither restarts nor scales."""

    deployed = False
    handle: TeacherHandleClient | EndpointTeacherClient

    def __init__(self, ctx: RunContext, counts: Counter[str], env: str | None = None) -> None:
        self.env = env
        super().__init__(ctx, counts)
        self.kind = self.settings.app

    def compose(self, run: TurnOPDSettings) -> TeacherServiceSettings:
        return run.for_teacher(self.env)

    def start(self) -> None:
        teacher = self.settings.teacher
        if teacher.endpoint_url:  # [teacher]'s, or this source's (a multi-environment run)
            section = "teacher" if self.env is None else f"[[sources]] {self.env!r}"
            client = endpoint_client(teacher, self.settings.top_k, os.environ, section)
            asyncio.run(client.check_top_k(self.settings.top_k))  # K above the server's cap: fail now
            asyncio.run(client.check_tokenizer(self._student_tokens()))  # other token ids: fail now
            asyncio.run(client.limits())  # a context it does not tell (a wrong model name): fail now
            self.handle = client
            return
        deploy_teacher(self.settings)
        self.deployed = True
        self.handle = TeacherHandleClient(app=self.settings.app)

    def _student_tokens(self) -> StudentTokens:
        """The tokenizer probe as the run's student reads it."""
        models = self.ctx.settings.models
        tokenizer = load_tokenizer(models.student, models.cache_dir)
        return student_tokens(tokenizer, tokenizer_text(models.student, models.cache_dir, len(tokenizer)))

    def _outside_the_run(self, what: str) -> None:
        if self.settings.teacher.endpoint_url:
            raise ConflictError(
                f"the teacher is the endpoint {self.settings.teacher.endpoint_url}, outside the run: {what} it there"
            )

    def stop(self) -> None:
        if self.deployed:
            serve.delete(self.settings.app)

    @property
    def replicas(self) -> int:
        """Replicas set by hand; 0 while Serve autoscales them."""
        teacher = self.settings.teacher
        return 0 if teacher.autoscaling or teacher.endpoint_url else teacher.replicas

    def replace(self, change: Change, step: int) -> str:
        self._outside_the_run("restart")
        self.settings = start_or_restore(deploy_teacher, self.restarted(change), self.settings)
        self.counts[self.kind] += 1
        return f"{self.kind} redeployed (new replicas, old ones drained)"

    def scale(self, size: int) -> str:
        self._outside_the_run("scale")
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
                name=self.kind,
                health="ok",
                restarts=self.counts[self.kind],
                version=f"{PurePath(model).name}, config {self.version()}",
                detail=f"{ENDPOINT_DETAIL}{teacher.endpoint_url}"
                if teacher.endpoint_url
                else f"Serve app '{self.kind}', {replicas_text(teacher)}",
            )
        ]


class RolloutPoolOps(ManagedService[RolloutWorkerServiceSettings]):
    """The rollout pool's workers; each holds its own settings (``RolloutPool.worker_settings``).
    The pipeline plays through ``pool``, which follows the gateway's replacements."""

    kind = "rollout-worker"
    pool: RolloutPool | None = None

    def __init__(self, ctx: RunContext, counts: Counter[str], gateway: EnvGatewayOps) -> None:
        super().__init__(ctx, counts)
        self.gateway = gateway
        gateway.on_switch(lambda url: started(self.pool, "rollout pool").switch_env_gateway(url))

    def compose(self, run: TurnOPDSettings) -> RolloutWorkerServiceSettings:
        return run.for_rollout_worker()

    def start(self) -> None:
        self.pool = RolloutPool(self.ctx.settings, self.gateway.url, self.ctx.settings.models.student)

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.close()

    def replace(self, change: Change, step: int) -> str:
        """``rollout-pool``: every worker, one after the other."""
        size = started(self.pool, "rollout pool").size
        return "; ".join(self.replace_worker(i, change) for i in range(size))

    def replace_worker(self, index: int, change: Change) -> str:
        pool = started(self.pool, "rollout pool")
        old = pool.worker_settings(index)
        start_or_restore(lambda s: pool.replace_worker(index, s), self.restarted(change, old), old)
        self.counts[worker_name(index)] += 1
        return f"{worker_name(index)} replaced at weights version {pool.weights_version}"

    def scale(self, size: int) -> str:
        """Resize in place (no restart, so no restart is counted)."""
        pool = started(self.pool, "rollout pool")
        before = pool.resize(size)
        return f"rollout pool {before} -> {size} workers at weights version {pool.weights_version}"

    def status(self, step: int) -> list[ServiceStatus]:
        pool = started(self.pool, "rollout pool")
        return [
            ServiceStatus(
                name=worker_name(i),
                health="ok" if live else "down",
                restarts=pool.stats.replacements_by_worker[i] + pool.stats.crashes_by_worker[i],
                version=f"weights {pool.weights_version}, config {settings.fingerprint()}",
                detail=f"{pool.stats.crashes_by_worker[i]} crash(es) recovered",
            )
            for i, settings, live in pool.members()  # one moment's view: a resize may run meanwhile
        ]


class LearnerOps(ManagedService[LearnerServiceSettings]):
    """The learner (Ray Train, or one plain actor); the pipeline steps it through ``handle``, which a replacement keeps."""

    kind = "learner"
    handle: LearnerHandle | None = None

    def __init__(self, ctx: RunContext, counts: Counter[str], pool: RolloutPoolOps) -> None:
        super().__init__(ctx, counts)
        self.pool = pool

    def compose(self, run: TurnOPDSettings) -> LearnerServiceSettings:
        return run.for_learner()

    def _learner(self, settings: LearnerServiceSettings) -> Learner:
        models = self.ctx.settings.models
        return Learner(settings, self.ctx.run.root, resolve_model_dir(models.student, models.cache_dir))

    def start(self) -> None:
        self.handle = LearnerHandle(self._learner(self.settings))
        # Before a learner closes, the pool copies the weights it put that the pool still holds.
        self.handle.keep_before_close(lambda: started(self.pool.pool, "rollout pool").own_weights())

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.close()

    def replace(self, change: Change, step: int) -> str:
        """Only between steps (the driver's thread): checkpoint, close, resume in a new trainer."""
        handle = started(self.handle, self.kind)
        new = self.restarted(change)
        if step > 0:
            handle.checkpoint(step)
        handle.retire()
        try:
            self.settings = start_or_restore(lambda s: self._resume(handle, s, step), new, self.settings)
        except RunBrokenError:
            raise
        except RESTART_ERRORS as exc:
            if not handle.alive:  # the retired trainer is all the handle has: the next step would fail
                raise LearnerLostError(
                    f"no learner could be started after a failed restart ({type(exc).__name__}: {exc}); "
                    f"the run stops at step {step}"
                ) from exc
            raise  # a trainer with the old settings took over: reported, training goes on
        self.counts[self.kind] += 1
        return f"learner replaced; resumed from the checkpoint of step {step}"

    def _resume(self, handle: LearnerHandle, settings: LearnerServiceSettings, step: int) -> None:
        learner = self._learner(settings)
        handle.attach(learner)
        if learner.resumed_step != step:
            raise ResumeMismatchError(
                f"the new learner resumed at step {learner.resumed_step}, not at the completed step {step}"
            )

    def status(self, step: int) -> list[ServiceStatus]:
        handle = started(self.handle, self.kind)
        return [
            ServiceStatus(
                name="learner",
                health="ok" if handle.alive else "down",
                restarts=self.counts[self.kind],
                version=f"step {step}, config {self.version()}",
                detail="one actor, without Ray Train"
                if handle.solo
                else f"Ray Train, {handle.world} worker(s)",
            )
        ]


T = TypeVar("T")


def started(live: T | None, what: str) -> T:
    """``live``, else the error that the service has not started (or was never this run's)."""
    if live is None:
        raise ConflictError(f"the {what} has not started")
    return live


@dataclass(frozen=True)
class Services:
    """The run's services (a teacher app per teacher), listed ``in_start_order``; each starts as soon
    as what it needs is up (``start_needs``) and stops once what needed it is down."""

    redis: RedisOps
    controller: ControllerOps
    env_gateway: EnvGatewayOps
    teachers: tuple[TeacherOps, ...]
    pool: RolloutPoolOps
    learner: LearnerOps

    @classmethod
    def of(cls, ctx: RunContext) -> "Services":
        counts: Counter[str] = Counter()
        redis = RedisOps(ctx, counts)
        gateway = EnvGatewayOps(ctx, counts)
        pool = RolloutPoolOps(ctx, counts, gateway)
        return cls(
            redis=redis,
            controller=ControllerOps(ctx, counts, redis),
            env_gateway=gateway,
            teachers=tuple(TeacherOps(ctx, counts, env) for env in teacher_envs(ctx.settings)),
            pool=pool,
            learner=LearnerOps(ctx, counts, pool),
        )

    @property
    def counts(self) -> Counter[str]:
        """Restarts per service name (shared by all)."""
        return self.redis.counts

    @property
    def teacher_replicas(self) -> int:
        """Teacher replicas set by hand, over every teacher app (0 for one that autoscales)."""
        return sum(t.replicas for t in self.teachers)

    def in_start_order(self) -> list[ManagedService[Any]]:
        return [self.redis, self.controller, self.env_gateway, *self.teachers, self.pool, self.learner]

    def start_needs(self) -> dict[ManagedService[Any], list[ManagedService[Any]]]:
        """What each service must have up before it starts (the rest start at once): the controller
        its Redis, the gateway Redis (a port each), the pool its gateway, a teacher app the one before
        it (Serve deploys in turn)."""
        needs: dict[ManagedService[Any], list[ManagedService[Any]]] = {
            self.controller: [self.redis],
            # both pick a free loopback port at start: one after the other, they cannot pick the same
            self.env_gateway: [self.redis],
            self.pool: [self.env_gateway],
        }
        for earlier, later in zip(self.teachers, self.teachers[1:], strict=False):
            needs[later] = [earlier]
        return needs

    def by_kind(self) -> dict[str, ManagedService[Any]]:
        """By ``kind``, in the order `turnopd status` lists them."""
        order: list[ManagedService[Any]] = [
            self.controller,
            self.pool,
            *self.teachers,
            self.env_gateway,
            self.learner,
            self.redis,
        ]
        return {service.kind: service for service in order}


def teacher_envs(settings: TurnOPDSettings) -> list[str | None]:
    """One env per teacher app: None for a single-teacher run, else the first source of each teacher."""
    if not settings.sources:
        return [None]
    first: dict[str, str] = {}
    for source in settings.task_sources():
        first.setdefault(teacher_app(source.teacher), source.env)
    return list(first.values())
