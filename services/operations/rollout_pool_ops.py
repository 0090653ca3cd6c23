"""`rollout-pool` and `rollout-worker-{i}`: the rollout pool, behind the lifecycle interface (``ManagedService``)."""

from collections import Counter

from services.contracts.operations import ServiceStatus
from services.operations.env_gateway_ops import EnvGatewayOps
from services.operations.managed_service import Change, ManagedService, RunContext, started
from services.operations.restart_rules import start_or_restore
from services.operations.run_pieces import RunPieces
from services.rollout_worker.actor import worker_name
from services.rollout_worker.pool import RolloutPool
from services.settings.per_service import RolloutWorkerServiceSettings


class RolloutPoolOps(ManagedService[RolloutWorkerServiceSettings]):
    """The rollout pool's workers; each holds its own settings (``RolloutPool.worker_settings``), and
    ``settings`` are those a worker that `turnopd scale` adds starts with. The pipeline plays through
    ``pool``, which follows the gateway's replacements."""

    kind = "rollout-worker"
    pool: RolloutPool | None = None

    def __init__(self, ctx: RunContext, counts: Counter[str], gateway: EnvGatewayOps) -> None:
        super().__init__(ctx, counts)
        self.gateway = gateway
        gateway.on_switch(lambda url: started(self.pool, "rollout pool").switch_env_gateway(url))

    def compose(self, run: RunPieces) -> RolloutWorkerServiceSettings:
        return run.rollout_worker

    def start(self) -> None:
        count = self.ctx.pieces.rollout_workers
        self.pool = RolloutPool(self.settings, count, self.gateway.url, self.settings.models.student)

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.close()

    def replace(self, change: Change, step: int) -> str:
        """``rollout-pool``: every worker, one after the other; once every one runs with a new
        config's settings, so does a worker a later scale adds."""
        size = started(self.pool, "rollout pool").size
        replaced = "; ".join(self.replace_worker(i, change) for i in range(size))
        self.settings = self.restarted(change) or self.settings
        started(self.pool, "rollout pool").retune(self.settings)  # its replays and deadlines too
        return replaced

    def replace_worker(self, index: int, change: Change) -> str:
        pool = started(self.pool, "rollout pool")
        old = pool.worker_settings(index)
        start_or_restore(lambda s: pool.replace_worker(index, s), self.restarted(change, old), old)
        self.counts[worker_name(index)] += 1
        return f"{worker_name(index)} replaced at weights version {pool.weights_version}"

    def scale(self, size: int) -> str:
        """Resize in place (no restart, so no restart is counted); new workers start with ``settings``."""
        pool = started(self.pool, "rollout pool")
        before = pool.resize(size, self.settings)
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
