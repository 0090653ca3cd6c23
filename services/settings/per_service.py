"""The settings object each service is given, composed from the run's tree by
``TurnOPDSettings.for_<service>``: a service receives this and nothing else.

Each type also says what `turnopd restart SERVICE --config FILE` may change: ``RESTARTABLE``
names its sections that a restart takes from the new file (each keeping its own run-defining
fields, ``Section.RUN_DEFINING``); every other field defines the run and stays as the run started,
so a restart can change how a service runs but never what the run computes.
"""

import hashlib
from pathlib import Path
from typing import ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from services.contracts.method import Method
from services.ray_names import TEACHER_APP
from services.settings.algorithm import BlendSettings, DepthSettings, DistillSettings, OptimSettings
from services.settings.controller import ControllerSettings
from services.settings.env_gateway import EnvGatewaySettings
from services.settings.learner import LearnerSettings
from services.settings.models import ModelsSettings
from services.settings.rollout_worker import RolloutWorkerSettings
from services.settings.teacher import TeacherSettings
from services.settings_section import Section


class ServiceSettings(BaseModel):
    """A service's own settings. ``RESTARTABLE``: the sections a restart with a new config replaces."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    RESTARTABLE: ClassVar[tuple[str, ...]] = ()

    def restarted(self, new: Self) -> Self:
        """These settings with the restartable sections taken from ``new`` (run-defining fields kept)."""
        update: dict[str, Section] = {}
        for name in self.RESTARTABLE:
            section: Section = getattr(self, name)
            update[name] = section.restarted(getattr(new, name))
        return self.model_copy(update=update)

    def fingerprint(self) -> str:
        """Eight hex digits identifying these settings (secrets masked), shown by `turnopd status`."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:8]


class ControllerServiceSettings(ServiceSettings):
    """All the controller service is given: the method, the run length, H_max, Algorithm 1's
    ``[depth]`` and the ``[blend]`` schedule. Every field defines the run: a restart keeps them."""

    method: Method
    steps: int = Field(ge=1)
    max_turns: int = Field(ge=1)
    depth: DepthSettings
    blend: BlendSettings
    env: str | None = Field(
        None, description="The task source it controls in a multi-environment run (None: the run's one)."
    )


class ControllersSettings(ServiceSettings):
    """What the `controller` actor is given: one controller per task source (one in a
    single-environment run, whose ``env`` is None)."""

    controllers: tuple[ControllerServiceSettings, ...] = Field(min_length=1)

    def envs(self) -> list[str | None]:
        return [c.env for c in self.controllers]


READY_TIMEOUT_S = 300.0  # a transformers engine: its checkpoint and, once, the decode kernels' build
VLLM_READY_TIMEOUT_S = 900.0  # vLLM's CPU build: 60-180 s measured on 2 cores (docs/vllm.md), x5


class RolloutWorkerServiceSettings(ServiceSettings):
    """All a rollout worker is given: ``[models]`` (engine, zoo, response length), the run's seed,
    ``[rollout_worker]``, the observation format, what the worker reserves on the cluster, and the
    service token for the env gateway, resolved once by the driver."""

    RESTARTABLE = ("models", "rollout_worker")

    models: ModelsSettings
    seed: int
    rollout_worker: RolloutWorkerSettings
    task_reminder: bool
    gpus: float = Field(
        0.0, ge=0.0, description="GPUs each worker reserves ([cluster] rollout_gpus_per_worker)."
    )
    pool_resource: bool = False  # each worker also reserves one unit of the rollout pool's resource
    service_token: SecretStr | None = None

    @property
    def ready_timeout_s(self) -> float:
        """``[rollout_worker] ready_timeout_s``, or when unset the wait the engine's start-up needs."""
        return self._startup_wait(self.rollout_worker.ready_timeout_s)

    @property
    def restart_timeout_s(self) -> float:
        """``[rollout_worker] restart_timeout_s``, or when unset the wait the engine's start-up needs."""
        return self._startup_wait(self.rollout_worker.restart_timeout_s)

    def _startup_wait(self, chosen: float | None) -> float:
        if chosen is not None:
            return chosen
        return VLLM_READY_TIMEOUT_S if self.models.engine == "vllm" else READY_TIMEOUT_S


class LearnerServiceSettings(ServiceSettings):
    """All the learner is given: the loss (``[distill]``), the optimizer and run length
    (``[optim]``), ``[learner]``, the run's seed and id, and its Ray Train workers."""

    RESTARTABLE = ("learner",)

    distill: DistillSettings
    optim: OptimSettings
    learner: LearnerSettings
    seed: int
    run_id: str | None
    workers: int = Field(1, ge=1)
    gpus_per_worker: float = Field(0.0, ge=0.0)
    pool_resource: bool = False  # each worker also reserves one unit of the learner pool's resource

    @property
    def on_gpu(self) -> bool:
        return self.gpus_per_worker > 0


class TeacherServiceSettings(ServiceSettings):
    """All the `teacher` Serve app is given: ``[teacher]``, the run's top-K, the teacher model it
    falls back to (``[models] teacher``, a zoo name or path, under ``cache_dir``) and the token."""

    RESTARTABLE = ("teacher",)

    teacher: TeacherSettings
    top_k: int = Field(ge=1)
    default_model: str
    cache_dir: Path | None
    service_token: SecretStr | None = None
    app: str = Field(
        TEACHER_APP, description="Its Serve app: `teacher`, or `teacher-<name>` of a multi-teacher run."
    )


class EnvGatewayServiceSettings(ServiceSettings):
    """All the env gateway is given: ``[env_gateway]`` and the service token, resolved once by the
    driver. A local gateway process gets the section as a file and the token in its environment."""

    RESTARTABLE = ("env_gateway",)

    env_gateway: EnvGatewaySettings
    service_token: SecretStr | None = None


class RedisServiceSettings(ServiceSettings):
    """The embedded Redis: ``[controller]``, where its URL, password and directory define the run."""

    RESTARTABLE = ("controller",)

    controller: ControllerSettings
