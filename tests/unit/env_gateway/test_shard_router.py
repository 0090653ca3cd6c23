"""The Serve app's shard router: episode ids carry their shard, new episodes go round-robin and
skip full shards, health and metrics add up. Stub shards stand in for the Serve deployments."""

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.contracts.env_gateway import EnvCatalog, EpisodeCreate, EpisodeStart, Health, StepResult
from services.env_gateway.episode_errors import GatewayBusyError
from services.env_gateway.metrics import GatewayMetrics
from services.env_gateway.shard_router import ShardRouter, merge_expositions, split_episode_id
from services.errors import NotFoundError

REQUEST = EpisodeCreate(env="alfworld", split="train", seed=1)


class StubShard:
    def __init__(self, name: str, full: bool = False) -> None:
        self.name, self.full, self.steps = name, full, []
        self.metrics = GatewayMetrics()

    async def create(self, request: EpisodeCreate) -> EpisodeStart:
        if self.full:
            raise GatewayBusyError(f"{self.name} full")
        return EpisodeStart(
            episode_id=f"{self.name}id",
            observation="o",
            objective="x.",
            admissible_actions=["look"],
            task_type="pick_and_place",
            game_id="g",
            seed=request.seed or 0,
        )

    async def step(self, episode_id: str, action: str) -> StepResult:
        self.steps.append(episode_id)
        self.metrics.steps.labels("alfworld").inc()
        return StepResult(observation="o", reward=0, done=False, won=False, admissible_actions=[], turn=1)

    async def delete(self, episode_id: str) -> None:
        return None

    async def catalog(self) -> EnvCatalog:
        return EnvCatalog(envs=[])

    async def health(self) -> Health:
        return Health(
            status="ok", workers=1, workers_expected=1, active_episodes=2, worker_restarts=0, worker_pids=[7]
        )

    async def metrics_text(self) -> bytes:
        return self.metrics.render()


def test_ids_route_back_to_their_shard_round_robin():
    shards = [StubShard("a"), StubShard("b")]
    router = ShardRouter(shards)  # type: ignore[list-item]

    async def go():
        ids = [(await router.create(REQUEST)).episode_id for _ in range(3)]
        for episode_id in ids:
            await router.step(episode_id, "look")
        return ids

    assert asyncio.run(go()) == ["s0-aid", "s1-bid", "s0-aid"]
    assert shards[0].steps == ["aid", "aid"] and shards[1].steps == ["bid"]


def test_full_shards_are_skipped_and_all_full_is_busy():
    router = ShardRouter([StubShard("a", full=True), StubShard("b")])  # type: ignore[list-item]
    assert asyncio.run(router.create(REQUEST)).episode_id == "s1-bid"
    all_full = ShardRouter([StubShard("a", full=True)])  # type: ignore[list-item]
    with pytest.raises(GatewayBusyError, match="every gateway shard is full"):
        asyncio.run(all_full.create(REQUEST))


@pytest.mark.parametrize("episode_id", ["nope", "s2-x", "s-x", "s0-", "x1-y"])
def test_ids_no_shard_owns_are_not_found(episode_id):
    with pytest.raises(NotFoundError):
        split_episode_id(episode_id, shards=2)


def test_health_and_metrics_add_up():
    shards = [StubShard("a"), StubShard("b")]
    router = ShardRouter(shards)  # type: ignore[list-item]
    health = asyncio.run(router.health())
    assert (health.workers, health.active_episodes, health.worker_pids) == (2, 4, [7, 7])
    asyncio.run(router.step("s1-x", "look"))
    merged = asyncio.run(router.metrics_text()).decode()
    families = {f.name: f for f in text_string_to_metric_families(merged)}
    steps = {s.labels["shard"]: s.value for s in families["turnopd_env_steps"].samples}
    assert steps == {"1": 1.0}
    assert "turnopd_env_steps_total" in merged and "_created" not in merged


def test_merge_keeps_histograms_whole():
    metrics = GatewayMetrics()
    metrics.step_latency.labels("alfworld").observe(0.03)
    merged = merge_expositions([metrics.render().decode(), metrics.render().decode()])
    assert merged.count('turnopd_env_step_latency_seconds_count{env="alfworld",shard=') == 2
