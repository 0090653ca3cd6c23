"""The services of one run (``Services``): built from the run's context, listed in the order they
start, what each needs up before it starts, and by ``kind`` for `turnopd restart` and `status`.
Each is a ``ManagedService`` (``services.operations.managed_service``), one module per service."""

from collections import Counter
from dataclasses import dataclass
from typing import Any

from services.operations.controller_ops import ControllerOps
from services.operations.env_gateway_ops import EnvGatewayOps
from services.operations.learner_ops import LearnerOps
from services.operations.managed_service import ManagedService, RunContext
from services.operations.redis_ops import RedisOps
from services.operations.rollout_pool_ops import RolloutPoolOps
from services.operations.teacher_ops import TeacherOps


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
            teachers=tuple(TeacherOps(ctx, counts, env) for env in ctx.pieces.teacher_envs),
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
