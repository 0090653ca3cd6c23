"""RolloutPoolOps: what a `rollout-pool` restart with a config applies is what a later scale starts
new workers with. A fake pool stands in for the Ray actors (the glue only; the real pool's resize
runs in tests/integration/test_rollout_pool_ops.py)."""

from collections import Counter
from pathlib import Path

import pytest

from services.operations.env_gateway_ops import EnvGatewayOps
from services.operations.managed_service import Change, RunContext
from services.operations.rollout_pool_ops import RolloutPoolOps
from services.operations.run_pieces import RunPieces
from services.run_dir import RunDir
from services.settings import TurnOPDSettings
from services.settings.per_service import RolloutWorkerServiceSettings

RUN = TurnOPDSettings()
NEW_CONFIG = TurnOPDSettings.model_validate(
    {"models": {"max_new_tokens": 17}, "rollout_worker": {"max_attempts": 5, "chunk_timeout_s": 60.0}}
)


class FakePool:
    """The pool as RolloutPoolOps drives it: each worker's settings, replacements and resizes."""

    weights_version = 3

    def __init__(self, fail_on_worker: int | None = None) -> None:
        self.settings_by_worker = [RUN.for_rollout_worker()] * 2
        self.fail_on_worker = fail_on_worker
        self.resized: list[tuple[int, RolloutWorkerServiceSettings]] = []
        self.own = RUN.for_rollout_worker()  # what the pool itself reads (replays, deadlines)

    def retune(self, settings: RolloutWorkerServiceSettings) -> None:
        self.own = settings

    @property
    def size(self) -> int:
        return len(self.settings_by_worker)

    def worker_settings(self, index: int) -> RolloutWorkerServiceSettings:
        return self.settings_by_worker[index]

    def replace_worker(self, index: int, settings: RolloutWorkerServiceSettings) -> None:
        if index == self.fail_on_worker and settings != self.settings_by_worker[index]:
            raise RuntimeError(f"rollout-worker-{index} did not start with the new settings")
        self.settings_by_worker[index] = settings

    def resize(self, size: int, settings: RolloutWorkerServiceSettings) -> int:
        before = self.size
        self.resized.append((size, settings))
        self.settings_by_worker = self.settings_by_worker[:size] + [settings] * (size - before)
        return before


def pool_ops(pool: FakePool) -> RolloutPoolOps:
    ctx = RunContext(pieces=RunPieces.of(RUN), run=RunDir(Path("unused")), run_id="r")
    ops = RolloutPoolOps(ctx, Counter(), EnvGatewayOps(ctx, Counter()))
    ops.pool = pool  # type: ignore[assignment]
    return ops


def test_a_scale_after_a_pool_restart_with_a_config_starts_workers_with_the_restarts_settings():
    """Issue 62: the restart gave every worker the new settings, but ``settings`` kept the old ones,
    and the pool grew with the settings of the run's start."""
    pool = FakePool()
    ops = pool_ops(pool)
    ops.replace(Change(RunPieces.of(NEW_CONFIG)), step=2)
    assert [s.models.max_new_tokens for s in pool.settings_by_worker] == [17, 17]
    assert ops.settings == pool.worker_settings(0)  # what it runs with now
    # and the pool's own knobs: the replays and chunk deadline of the new config, not the run's start
    assert (pool.own.rollout_worker.max_attempts, pool.own.rollout_worker.chunk_timeout_s) == (5, 60.0)
    assert ops.scale(3) == "rollout pool 2 -> 3 workers at weights version 3"
    [(size, added)] = pool.resized
    assert size == 3 and added == pool.worker_settings(0) and added.models.max_new_tokens == 17


def test_a_pool_restart_without_a_config_leaves_what_a_scale_adds_as_it_was():
    pool = FakePool()
    ops = pool_ops(pool)
    ops.replace(Change(), step=2)
    ops.scale(3)
    assert pool.resized == [(3, RUN.for_rollout_worker())]


def test_one_workers_restart_with_a_config_changes_that_worker_only():
    pool = FakePool()
    ops = pool_ops(pool)
    ops.replace_worker(1, Change(RunPieces.of(NEW_CONFIG)))
    ops.scale(3)
    assert [s.models.max_new_tokens for s in pool.settings_by_worker] == [
        RUN.models.max_new_tokens,
        17,
        RUN.models.max_new_tokens,
    ]


def test_a_pool_restart_that_fails_part_way_leaves_what_a_scale_adds_as_it_was():
    """Worker 1 refuses the new settings and comes back with its old ones: the pool as a whole does
    not run with them, so workers a scale adds start as the run did."""
    pool = FakePool(fail_on_worker=1)
    ops = pool_ops(pool)
    with pytest.raises(RuntimeError, match="rollout-worker-1 did not start"):
        ops.replace(Change(RunPieces.of(NEW_CONFIG)), step=2)
    ops.scale(3)
    assert pool.resized == [(3, RUN.for_rollout_worker())]
