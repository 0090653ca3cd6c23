"""Each service's settings, resolved once from a run's tree: what the operations layer holds
instead of the tree (at the run's start, on resume, and from the config file of a
`turnopd restart --config`, where a restart takes its service's piece from the new file's).
"""

from collections.abc import Mapping
from dataclasses import dataclass

from services.errors import InputError
from services.settings.models import ModelsSettings
from services.settings.per_service import (
    ControllersSettings,
    EnvGatewayServiceSettings,
    LearnerServiceSettings,
    RedisServiceSettings,
    RolloutWorkerServiceSettings,
    TeacherServiceSettings,
)
from services.settings.tree import TurnOPDSettings


@dataclass(frozen=True)
class RunPieces:
    redis: RedisServiceSettings
    controllers: ControllersSettings
    allow_unauthenticated_redis: bool  # the controller's check of a Redis URL beyond the loopback
    env_gateway: EnvGatewayServiceSettings
    rollout_worker: RolloutWorkerServiceSettings
    rollout_workers: int  # the pool's size at start ([cluster] rollout_workers)
    learner: LearnerServiceSettings
    models: ModelsSettings  # the student the learner starts from and the teacher's tokenizer probe reads
    # the teacher app's settings as each source's env composes it; None: a run's one teacher
    teachers: Mapping[str | None, TeacherServiceSettings]
    teacher_envs: tuple[str | None, ...]  # one env per teacher app: the first source of each teacher

    @classmethod
    def of(cls, settings: TurnOPDSettings) -> "RunPieces":
        sources = settings.task_sources() if settings.sources else []
        teachers: dict[str | None, TeacherServiceSettings] = {
            s.env: settings.for_teacher(s.env) for s in sources
        }
        if not sources:
            teachers[None] = settings.for_teacher()
        return cls(
            redis=settings.for_redis(),
            controllers=settings.for_controllers(),
            allow_unauthenticated_redis=settings.security.allow_unauthenticated_redis,
            env_gateway=settings.for_env_gateway(),
            rollout_worker=settings.for_rollout_worker(),
            rollout_workers=settings.cluster.rollout_workers,
            learner=settings.for_learner(),
            models=settings.models,
            teachers=teachers,
            teacher_envs=tuple(settings.teacher_envs()),
        )

    def teacher(self, env: str | None) -> TeacherServiceSettings:
        """The teacher app's settings of the source ``env`` (None: the run's one teacher)."""
        if env not in self.teachers:
            have = ", ".join(str(e) for e in self.teachers)
            raise InputError(f"the config has no source {env!r} for its teacher (it has: {have})")
        return self.teachers[env]
