"""`teacher` (one Serve app per teacher), behind the lifecycle interface (``ManagedService``), and
how it is deployed."""

import os
from collections import Counter
from pathlib import PurePath

import ray
from ray import serve

from services.cluster_capacity import check_free_resources
from services.contracts.operations import ServiceStatus
from services.errors import ConflictError
from services.models.loading import load_tokenizer
from services.models.registry import resolve_model_dir
from services.models.tokenizer_match import tokenizer_text
from services.operations.managed_service import Change, ManagedService, RunContext
from services.operations.restart_rules import start_or_restore
from services.operations.run_pieces import RunPieces
from services.operations.service_probes import ENDPOINT_DETAIL
from services.serve_config import check_serve_proxy
from services.settings.per_service import TeacherServiceSettings
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.endpoint_client import EndpointTeacherClient, endpoint_client
from services.teacher_scorer.handle_client import TeacherHandleClient
from services.teacher_scorer.placement import replica_resources
from services.teacher_scorer.retry import RetryPolicy
from services.teacher_scorer.serve_app import teacher_application
from services.teacher_scorer.token_probe import StudentTokens, student_tokens


def replicas_text(teacher: TeacherSettings) -> str:
    if teacher.autoscaling:
        return f"{teacher.min_replicas}-{teacher.max_replicas} replicas (autoscaling)"
    return f"{teacher.replicas} replica(s)"


def deploy_teacher(settings: TeacherServiceSettings) -> None:
    """Deploy (or redeploy, rolling) the `teacher` Serve app; an unset ``[teacher] model`` means the
    run's ``[models] teacher``. Refused (ConfigError) where the cluster's Serve proxy listens beyond
    the loopback and the run has no service token."""
    teacher = settings.teacher
    if not teacher.model:
        model = resolve_model_dir(settings.default_model, settings.cache_dir)
        teacher = teacher.model_copy(update={"model": str(model)})
    token = settings.service_token.get_secret_value() if settings.service_token is not None else None
    app = settings.app
    check_serve_proxy(token, app)
    serve.run(teacher_application(teacher, settings.top_k, token), name=app, route_prefix=f"/{app}")


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

    def compose(self, run: RunPieces) -> TeacherServiceSettings:
        return run.teacher(self.env)

    def start(self) -> None:
        teacher = self.settings.teacher
        if teacher.endpoint_url:  # [teacher]'s, or this source's (a multi-environment run)
            section = "teacher" if self.env is None else f"[[sources]] {self.env!r}"
            self.handle = endpoint_client(teacher, self.settings.top_k, os.environ, section)
            return
        deploy_teacher(self.settings)
        self.deployed = True
        self.handle = TeacherHandleClient(
            app=self.settings.app, policy=RetryPolicy.from_settings(self.settings.teacher)
        )

    async def preflight(self) -> None:
        """An endpoint's start-up checks (K, the student's tokens, a context), before step 1: a
        mismatch stops the run now, not mid-run. A deployed app needs none (it loads the run's teacher)."""
        if isinstance(self.handle, EndpointTeacherClient):
            await self.handle.preflight(self.settings.top_k, self._student_tokens())

    def _student_tokens(self) -> StudentTokens:
        """The tokenizer probe as the run's student reads it."""
        models = self.ctx.pieces.models
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
