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
  copied into objects the driver owns (``keep_weights``).
* ``redis`` (the embedded server only): stopped and started again on the same port and
  append-only file; the controller's commands reconnect and a transaction cut off is run again.

A restart that fails to start the new process with a new config brings the service back with
the settings it had, and reports the failure.
"""

import logging
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import ray

from services.cluster_capacity import check_free_resources
from services.contracts.operations import RestartRequest, RestartResult
from services.controller.actor import start_controller
from services.env_gateway.local_server import LocalGateway
from services.errors import ConflictError, TurnOPDError
from services.learner.service import Learner
from services.operations.restart_settings import (
    RESTART_ERRORS,
    config_hash,
    restart_settings,
    service_kind,
    start_or_restore,
    worker_index,
)
from services.operations.stack import Stack, deploy_teacher
from services.ray_names import CONTROLLER_ACTOR as ACTOR_NAME
from services.ray_names import NAMESPACE
from services.ray_session import wait_name_free
from services.settings import load_settings
from services.settings.tree import TurnOPDSettings
from services.teacher_scorer.placement import replica_resources

log = logging.getLogger(__name__)


class ResumeMismatchError(RuntimeError):
    """A replaced learner did not resume at the completed step: going on would skip or repeat steps."""


class ServiceRestarts:
    """Restarts of the services of one ``Stack``, with the counts and config hashes `turnopd status` shows."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.counts: Counter[str] = Counter()
        settings = stack.settings
        self.settings: dict[str, TurnOPDSettings] = {
            kind: settings for kind in ("teacher", "env-gateway", "controller", "learner", "redis")
        }
        self.history: list[RestartResult] = []
        # Run before a learner closes (after the pool's own copy): each copies the weights the old
        # learner put that it still holds.
        self.keep_weights: list[Callable[[], None]] = []

    def version(self, service: str) -> str:
        """Config hash of the settings ``service`` runs with now."""
        index = worker_index(service)
        if index is not None:
            return config_hash(self.stack.pool.worker_settings(index), service)
        return config_hash(self.settings[service], service)

    def run(self, request: RestartRequest, step: int) -> RestartResult:
        """Carry out ``request`` with ``step`` steps done; failures come back as a result with ``ok=False``.

        A learner restart must run on the driver's thread between steps (``RestartLoop`` does so).
        """
        started_at, t0 = time.time(), time.perf_counter()
        try:
            if request.replicas is not None:
                message = self._scale(request.service, request.replicas)
            else:
                message = self._restart(request.service, request.config_path, step)
            ok = True
        except ResumeMismatchError:
            raise
        except RESTART_ERRORS as exc:  # the operator's boundary: report the failure, train on
            log.exception("restart of %s failed", request.service)
            message, ok = f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}", False
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

    def _scale(self, service: str, size: int) -> str:
        """`turnopd scale`: resize a pool in place (no restart, so no restart is counted)."""
        if service == "teacher":
            return self._scale_teacher(size)
        pool = self.stack.pool
        before = pool.resize(size)
        return f"rollout pool {before} -> {size} workers at weights version {pool.weights_version}"

    def _scale_teacher(self, size: int) -> str:
        old = self.settings["teacher"]
        teacher = old.teacher
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
        new = old.model_copy(deep=True)
        new.teacher.replicas = size
        new.cluster.teacher_replicas = size
        self._deploy_teacher(new)  # a new deploy: Serve's rolling update replaces the replicas
        self.settings["teacher"] = new
        return f"teacher {before} -> {size} replicas"

    def _new_settings(self, service: str, config_path: str | None) -> TurnOPDSettings | None:
        if config_path is None:
            return None
        return restart_settings(self.stack.settings, load_settings(Path(config_path)), service)

    def _restart(self, service: str, config_path: str | None, step: int) -> str:
        new = self._new_settings(service, config_path)
        index = worker_index(service)
        if index is not None:
            return self._rollout_worker(index, new)
        match service_kind(service):
            case "rollout-worker":  # rollout-pool: every worker, one after the other
                return "; ".join(self._rollout_worker(i, new) for i in range(self.stack.pool.size))
            case "teacher":
                return self._teacher(new)
            case "env-gateway":
                return self._env_gateway(config_path)
            case "controller":
                return self._controller(new)
            case "learner":
                return self._learner(new, step)
            case "redis":
                return self._redis()
            case other:
                raise ConflictError(f"no restart for {other!r}")

    def _rollout_worker(self, index: int, new: TurnOPDSettings | None) -> str:
        pool = self.stack.pool
        start_or_restore(lambda s: pool.replace_worker(index, s), new, pool.worker_settings(index))
        self.counts[f"rollout-worker-{index}"] += 1
        return f"rollout-worker-{index} replaced at weights version {pool.weights_version}"

    def _teacher(self, new: TurnOPDSettings | None) -> str:
        self.settings["teacher"] = start_or_restore(self._deploy_teacher, new, self.settings["teacher"])
        self.counts["teacher"] += 1
        return "teacher redeployed (new replicas, old ones drained)"

    def _deploy_teacher(self, settings: TurnOPDSettings) -> None:
        deploy_teacher(settings, self.stack.settings.distill.distill_topk)

    def _env_gateway(self, config_path: str | None) -> str:
        stack = self.stack
        if stack.gateway is None:
            raise ConflictError(
                f"the env gateway at {stack.env_url} was not started by this run; restart it where it runs"
            )
        count = self.counts["env-gateway"] + 1
        config = Path(config_path) if config_path is not None else stack.config_file
        fresh = LocalGateway(config, log_path=stack.run.path(f"env_gateway.{count}.log")).start()
        stack.exits.callback(fresh.stop)
        old = stack.gateway
        stack.pool.switch_env_gateway(fresh.url)
        stack.gateway, stack.env_url = fresh, fresh.url
        old.stop()
        if config_path is not None:
            self.settings["env-gateway"] = load_settings(Path(config_path))
        self.counts["env-gateway"] += 1
        return f"env gateway replaced: {old.url} -> {fresh.url}"

    def _controller(self, new: TurnOPDSettings | None) -> str:
        stack = self.stack
        ray.kill(stack.controller.handle, no_restart=True)
        if not wait_name_free(ACTOR_NAME, NAMESPACE, 60.0):
            raise TurnOPDError("the old controller's name is still taken after 60 s")

        def start(settings: TurnOPDSettings) -> None:
            stack.controller.replace(start_controller(settings, stack.run_id, stack.redis_url))

        self.settings["controller"] = start_or_restore(start, new, self.settings["controller"])
        self.counts["controller"] += 1
        state = stack.controller.handle.snapshot.remote()
        return f"controller replaced; resumed from Redis at step {ray.get(state).depth.step}"

    def _learner(self, new: TurnOPDSettings | None, step: int) -> str:
        """Only between steps (the driver's thread): checkpoint, close, resume in a new trainer."""
        stack = self.stack
        if step > 0:
            stack.learner.checkpoint(step)
        for keep in [stack.pool.own_weights, *self.keep_weights]:
            keep()
        stack.learner.close()
        self.settings["learner"] = start_or_restore(
            lambda s: self._start_learner(s, step), new, self.settings["learner"]
        )
        self.counts["learner"] += 1
        return f"learner replaced; resumed from the checkpoint of step {step}"

    def _start_learner(self, settings: TurnOPDSettings, step: int) -> None:
        learner = Learner(settings, self.stack.run.root, self.stack.student_dir)
        self.stack.exits.callback(learner.close)
        self.stack.learner = learner
        if learner.resumed_step != step:
            raise ResumeMismatchError(
                f"the new learner resumed at step {learner.resumed_step}, not at the completed step {step}"
            )

    def _redis(self) -> str:
        server = self.stack.redis
        if server is None:
            raise ConflictError(
                "Redis is external to this run ([controller] redis_url or REDIS_URL); restart it where it runs"
            )
        server.restart(self.stack.settings.controller.redis_start_timeout_s)
        self.counts["redis"] += 1
        return f"redis-server restarted on port {server.port} from its append-only file"
