"""The one typed settings tree. Keys of the paper's hyperparameter table keep the paper's names.

Every field has a one-line description and bounds; invalid values fail at load time with a
message that names the dotted key (see ``services.settings.loader``).
"""

import json
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, model_validator

from services.contracts.method import Method
from services.errors import InputError
from services.ray_names import TEACHER_APP, teacher_app
from services.settings.algorithm import BlendSettings, DepthSettings, DistillSettings, OptimSettings
from services.settings.cluster import ClusterSettings
from services.settings.controller import ControllerSettings
from services.settings.env_gateway import EnvGatewaySettings
from services.settings.learner import LearnerSettings
from services.settings.metrics import MetricsSettings
from services.settings.models import ModelsSettings
from services.settings.per_service import (
    ControllerServiceSettings,
    ControllersSettings,
    EnvGatewayServiceSettings,
    LearnerServiceSettings,
    RedisServiceSettings,
    RolloutWorkerServiceSettings,
    TeacherServiceSettings,
)
from services.settings.pipeline import PipelineSettings
from services.settings.retrieval_server import RetrievalServerSettings
from services.settings.rollout_worker import RolloutWorkerSettings
from services.settings.security import SecuritySettings
from services.settings.sources import TomlSettings
from services.settings.task_mix import TaskSource, TaskSourceSettings, resolve_sources
from services.settings.teacher import ENDPOINT_KEYS, TeacherSettings
from services.settings_section import Section
from services.vllm_support.limits import temperature_problem


class RunSettings(Section):
    method: Method = Field("turnopd", description="Training method: full TurnOPD or one of the baselines.")
    seed: int = Field(0, ge=0, description="Seed for task sampling, generation and initialisation.")
    run_dir: Path = Field(Path("runs/latest"), description="Directory for config, metrics, checkpoints.")
    run_id: str | None = Field(None, min_length=1, description="Controller run id (Redis key prefix).")


class RolloutSettings(Section):
    env: str = Field("alfworld", min_length=1, description="Env backend the run trains on.")
    task_types: list[str] = Field(
        default_factory=list, description="Task types to sample round-robin (empty: any task type)."
    )
    max_turns: int = Field(80, ge=1, description="Rollout turn cap before adaptive-depth truncation.")
    temperature: float = Field(1.0, gt=0.0, description="Training rollout sampling temperature.")
    n: int = Field(1, ge=1, description="Samples per task in training rollouts.")
    task_reminder: bool = Field(
        False,
        description="End every tool observation with the task restated ('Your task is to: ...'); a "
        "model plays (and SFT renders) in the format it was trained with, recorded in its manifest.",
    )
    max_infra_failure_frac: float = Field(
        0.25,
        ge=0.0,
        le=1.0,
        description="Share of a step's episodes that may fail for the system's reasons (env_lost, "
        "worker_lost: after the pool's replays) before the run stops with an error instead of "
        "training on the rest.",
    )


class EvalSettings(Section):
    interval: int = Field(10, ge=1, description="Evaluate every N optimizer steps (and after the last).")
    at_start: bool = Field(True, description="Also evaluate the starting student before step 1.")
    split: str = Field("valid_unseen", min_length=1, description="Validation split.")
    episodes: int = Field(30, ge=1, description="Validation games per evaluation (task types round-robin).")
    seed: int = Field(
        1234, ge=0, description="Seed choosing the validation games (fixed across evaluations)."
    )
    val_n: int = Field(4, ge=1, description="Samples per validation task (Avg@n).")
    val_temperature: float = Field(
        0.85, ge=0.0, description="Validation sampling temperature; 0 decodes greedily (argmax)."
    )


class DiagnosticsSettings(Section):
    min_survivors: int = Field(
        8, ge=0, description="A turn is supported in a step with >= this many survivors."
    )
    min_survivor_frac: float = Field(0.1, ge=0.0, le=1.0, description="... and >= this fraction of turn 0's.")
    min_step_frac: float = Field(
        0.6, ge=0.0, le=1.0, description="Reliable if supported in >= this share of steps."
    )


# Sections that left the run settings -> where they went. A run config that sets one is an error
# naming that; a run's saved config.json that holds one still reads (``saved_settings``).
MOVED_SECTIONS: dict[str, str] = {
    "sft": "[sft] belongs to a teacher-training recipe, not to a run config: keep it in a file of its "
    "own (as configs/teachers/*.toml) for `turnopd teacher train --config`",
}


class TurnOPDSettings(TomlSettings):
    """Root of a run's settings: TOML file values, overridden by ``TURNOPD_SECTION__KEY`` env vars."""

    run: RunSettings = Field(default_factory=RunSettings)
    distill: DistillSettings = Field(default_factory=DistillSettings)
    depth: DepthSettings = Field(default_factory=DepthSettings)
    blend: BlendSettings = Field(default_factory=BlendSettings)
    optim: OptimSettings = Field(default_factory=OptimSettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    pipeline: PipelineSettings = Field(default_factory=PipelineSettings)
    eval: EvalSettings = Field(default_factory=EvalSettings)
    diagnostics: DiagnosticsSettings = Field(default_factory=DiagnosticsSettings)
    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    learner: LearnerSettings = Field(default_factory=LearnerSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    models: ModelsSettings = Field(default_factory=ModelsSettings)
    teacher: TeacherSettings = Field(default_factory=TeacherSettings)
    env_gateway: EnvGatewaySettings = Field(default_factory=EnvGatewaySettings)
    rollout_worker: RolloutWorkerSettings = Field(default_factory=RolloutWorkerSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    retrieval_server: RetrievalServerSettings = Field(default_factory=RetrievalServerSettings)
    sources: list[TaskSourceSettings] = Field(
        default_factory=list,
        description="Task sources of a multi-environment run (empty: [rollout] env alone).",
    )

    def task_sources(self) -> list[TaskSource]:
        """The sources a step plays, every override applied (one, the run's own, without [[sources]])."""
        if self.sources:
            r = self.rollout
            return resolve_sources(self.sources, self.depth, self.blend, r.max_turns, r.task_reminder)
        return [
            TaskSource(
                env=self.rollout.env,
                share=1.0,
                teacher=self.models.teacher,
                split="train",
                eval_split=self.eval.split,
                task_types=tuple(self.rollout.task_types),
                max_turns=self.rollout.max_turns,
                task_reminder=self.rollout.task_reminder,
                depth=self.depth,
                blend=self.blend,
            )
        ]

    def for_controller(self, env: str | None = None) -> ControllerServiceSettings:
        """The controller service's own settings, composed from the run's; ``env``: the controller of
        that source of a multi-environment run (its [depth], [blend] and max_turns overrides)."""
        if env is None:
            return ControllerServiceSettings(
                method=self.run.method,
                steps=self.optim.steps,
                max_turns=self.rollout.max_turns,
                depth=self.depth,
                blend=self.blend,
            )
        source = self.task_source(env)
        return ControllerServiceSettings(
            method=self.run.method,
            steps=self.optim.steps,
            max_turns=source.max_turns,
            depth=source.depth,
            blend=source.blend,
            env=env,
        )

    def for_controllers(self) -> ControllersSettings:
        """Every controller of the run: one per source of [[sources]], else the run's one."""
        if not self.sources:
            return ControllersSettings(controllers=(self.for_controller(),))
        return ControllersSettings(controllers=tuple(self.for_controller(s.env) for s in self.task_sources()))

    def task_source(self, env: str) -> TaskSource:
        """The source that plays ``env``; InputError naming the sources if none does."""
        sources = self.task_sources()
        for source in sources:
            if source.env == env:
                return source
        raise InputError(f"no task source plays env {env!r}; the sources play {[s.env for s in sources]}")

    def _service_token(self) -> SecretStr | None:
        token = self.security.resolved_service_token()
        return SecretStr(token) if token is not None else None

    def for_rollout_worker(self) -> RolloutWorkerServiceSettings:
        """A rollout worker's own settings, composed from the run's."""
        return RolloutWorkerServiceSettings(
            models=self.models,
            seed=self.run.seed,
            rollout_worker=self.rollout_worker,
            task_reminder=self.rollout.task_reminder,
            gpus=self.cluster.rollout_gpus_per_worker,
            pool_resource=self.cluster.pool_resources,
            service_token=self._service_token(),
        )

    def for_learner(self) -> LearnerServiceSettings:
        """The learner's own settings, composed from the run's."""
        return LearnerServiceSettings(
            distill=self.distill,
            optim=self.optim,
            learner=self.learner,
            seed=self.run.seed,
            run_id=self.run.run_id,
            workers=self.cluster.learner_workers,
            gpus_per_worker=self.cluster.learner_gpus_per_worker,
            pool_resource=self.cluster.pool_resources,
        )

    def for_teacher(self, env: str | None = None) -> TeacherServiceSettings:
        """The `teacher` Serve app's own settings, composed from the run's; ``env``: the app of that
        source's teacher (`teacher-<name>`) in a multi-environment run."""
        model, app, teacher = self.models.teacher, TEACHER_APP, self.teacher
        if env is not None:
            source = self.task_source(env)
            model, app = source.teacher, teacher_app(source.teacher)
            if source.endpoint_url:  # this source scores on a server: [teacher]'s client keys apply
                teacher = teacher.model_copy(update={key: getattr(source, key) for key in ENDPOINT_KEYS})
        return TeacherServiceSettings(
            teacher=teacher,
            top_k=self.distill.distill_topk,
            default_model=model,
            cache_dir=self.models.cache_dir,
            service_token=self._service_token(),
            app=app,
        )

    def teacher_envs(self) -> list[str | None]:
        """One env per teacher app, the first source of each distinct teacher of [[sources]]; [None]:
        the run's one teacher."""
        if not self.sources:
            return [None]
        first: dict[str, str] = {}
        for source in self.task_sources():
            first.setdefault(teacher_app(source.teacher), source.env)
        return list(first.values())

    def for_teachers(self) -> list[TeacherServiceSettings]:
        """Every teacher app of the run: one per distinct teacher of [[sources]], else the run's one."""
        return [self.for_teacher(env) for env in self.teacher_envs()]

    def for_env_gateway(self) -> EnvGatewayServiceSettings:
        return EnvGatewayServiceSettings(env_gateway=self.env_gateway, service_token=self._service_token())

    def for_redis(self) -> RedisServiceSettings:
        return RedisServiceSettings(controller=self.controller)

    @model_validator(mode="before")
    @classmethod
    def _no_moved_section(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in sorted(set(data) & set(MOVED_SECTIONS)):
                raise ValueError(MOVED_SECTIONS[name])
        return data

    @model_validator(mode="after")
    def _one_task_mix(self) -> "TurnOPDSettings":
        """With [[sources]], each source names its env, teacher and eval split: the run-wide keys
        they replace may not be set otherwise than their defaults (they would do nothing). A saved
        config, which holds every key at its default, reads back."""
        if not self.sources:
            return self
        for section, key in (
            ("rollout", "env"),
            ("rollout", "task_types"),
            ("eval", "split"),
            ("models", "teacher"),
        ):
            values = getattr(self, section)
            if getattr(values, key) != type(values).model_fields[key].get_default(call_default_factory=True):
                raise ValueError(
                    f"{section}.{key} is set, but a run with [[sources]] takes it from each source; remove it"
                )
        if self.teacher.model:
            raise ValueError(
                "teacher.model is set, but a run with [[sources]] takes each source's teacher; remove it"
            )
        if self.teacher.endpoint_url:
            raise ValueError(
                "teacher.endpoint_url is set, but a run with [[sources]] scores each source on its own "
                "teacher; set endpoint_url in the [[sources]] entries that score on a server"
            )
        apps: dict[str, TaskSource] = {}
        for i, source in enumerate(self.task_sources()):  # the shares, envs and overrides are checked here
            app = teacher_app(source.teacher)
            other = apps.setdefault(app, source)
            if other.teacher != source.teacher:
                raise ValueError(
                    f"sources[{i}].teacher: {source.teacher!r} and {other.teacher!r} would both be the Serve "
                    f"app {app!r}; give their directories different names"
                )
            if any(getattr(other, key) != getattr(source, key) for key in ENDPOINT_KEYS):
                raise ValueError(
                    f"sources[{i}]: teacher {source.teacher!r} is also the teacher of source {other.env!r}, "
                    f"which scores it elsewhere ({', '.join(ENDPOINT_KEYS)}); one teacher, one place"
                )
        return self

    @model_validator(mode="after")
    def _within_vllm_limits(self) -> "TurnOPDSettings":
        """What a vLLM engine would refuse or alter fails here, at load, rather than mid-run."""
        if self.models.engine == "vllm":
            for key, value in [
                ("rollout.temperature", self.rollout.temperature),
                ("eval.val_temperature", self.eval.val_temperature),
            ]:
                problem = temperature_problem(value)
                if problem is not None:
                    raise ValueError(f"{key} with models.engine = 'vllm': {problem}")
        if self.teacher.engine == "vllm" and self.distill.distill_topk > self.teacher.vllm_max_logprobs:
            raise ValueError(
                f"distill.distill_topk ({self.distill.distill_topk}) exceeds teacher.vllm_max_logprobs "
                f"({self.teacher.vllm_max_logprobs}), the most log-probs the vLLM teacher returns"
            )
        return self

    @model_validator(mode="after")
    def _one_teacher_pool_size(self) -> "TurnOPDSettings":
        """The teacher pool is sized once. ``[cluster]`` sizes every pool (the deploy checks compare
        it with the manifests); ``[teacher]`` is what the Serve deployment reads. A key set on one
        side is the other's value; set on both sides, they must agree. With ``[cluster]
        pool_resources`` the replicas ask for ``teacher_pool`` unless ``[teacher] resources`` says
        otherwise."""
        cluster, teacher = self.cluster, self.teacher
        for cluster_key, teacher_key in (
            ("teacher_replicas", "replicas"),
            ("teacher_gpus_per_replica", "num_gpus"),
        ):
            pool_value, served = getattr(cluster, cluster_key), getattr(teacher, teacher_key)
            pool_set, served_set = (
                cluster_key in cluster.model_fields_set,
                teacher_key in teacher.model_fields_set,
            )
            if pool_set and served_set and float(pool_value) != float(served):
                raise ValueError(
                    f"cluster.{cluster_key} ({pool_value}) and teacher.{teacher_key} ({served}) disagree; "
                    "set one of them"
                )
            if pool_set and not served_set:
                setattr(teacher, teacher_key, pool_value)
            elif served_set and not pool_set and float(served).is_integer():
                setattr(cluster, cluster_key, int(served))
        if cluster.pool_resources and "resources" not in teacher.model_fields_set:
            teacher.resources = {"teacher_pool": 1.0}
        return self


# Sections a run's config.json may hold from before they left the run settings; dropped on reading.
def saved_settings_dict(text: str) -> dict[str, Any]:
    """A run's saved ``config.json`` as a dict, without the sections that have since moved out."""
    values = json.loads(text)
    return {key: value for key, value in values.items() if key not in MOVED_SECTIONS}


def saved_settings(text: str) -> TurnOPDSettings:
    """The settings a run's ``config.json`` holds (written by any version of TurnOPD since the keys
    it has were added)."""
    return TurnOPDSettings.model_validate_json(json.dumps(saved_settings_dict(text)))
