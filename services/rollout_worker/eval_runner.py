"""Run one evaluation end to end: env gateway (given or started), local Ray, the rollout pool.

Without an ``env_url`` a gateway is started as a child process (``LocalGateway``: `turnopd serve
env-gateway` on a free loopback port, with the same config file) and stopped afterwards. Ray is
joined when already initialised or ``RAY_ADDRESS`` is set, else started locally with enough
logical CPUs for the pool (and shut down afterwards).
"""

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from services.contracts.env_gateway import EnvCatalog
from services.contracts.rollout import EpisodeTask, EvalReport, RolloutResult
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.local_server import LocalGateway
from services.errors import InputError
from services.rollout_worker.evaluation import eval_report, eval_tasks
from services.rollout_worker.seeds import derive_seed
from services.settings.tree import TurnOPDSettings


@dataclass(frozen=True)
class EvalSpec:
    """What to evaluate: a model on ``episodes`` games of a split, ``n`` samples each."""

    model: str
    env: str
    split: str
    episodes: int
    n: int
    temperature: float
    max_turns: int
    seed: int
    max_new_tokens: int | None = None


@dataclass(frozen=True)
class EvalRun:
    """An evaluation's report, with the tasks it played and the pool's result (trajectories)."""

    report: EvalReport
    tasks: list[EpisodeTask]
    result: RolloutResult


class EvalProgress:
    """Callbacks of a running evaluation (the CLI's progress bar); the defaults do nothing."""

    def stage(self, description: str) -> None:
        """A setup stage begins (starting the gateway, Ray, the workers)."""

    def start(self, total_episodes: int) -> None:
        """Play begins."""

    def advance(self, result: RolloutResult) -> None:
        """One worker call finished."""


def run_eval(
    settings: TurnOPDSettings,
    spec: EvalSpec,
    *,
    env_url: str | None = None,
    config: Path | None = None,
    progress: EvalProgress | None = None,
) -> EvalRun:
    """Play the evaluation and score it."""
    progress = progress or EvalProgress()
    with _gateway(settings, env_url, config, progress.stage) as url:
        token = settings.security.resolved_service_token()
        task_types = _task_types(asyncio.run(_catalog(url, token)), spec.env, spec.split)
        tasks = eval_tasks(spec.env, spec.split, spec.episodes, spec.n, spec.seed, task_types)
        result = _play(settings, url, spec, tasks, progress)
    report = eval_report(
        tasks,
        result,
        model=spec.model,
        n=spec.n,
        temperature=spec.temperature,
        max_turns=spec.max_turns,
        seed=spec.seed,
        task_types=task_types,
    )
    return EvalRun(report, tasks, result)


@contextmanager
def _gateway(
    settings: TurnOPDSettings, env_url: str | None, config: Path | None, stage: Callable[[str], None]
) -> Iterator[str]:
    if env_url is not None:
        yield env_url
        return
    stage("starting the env gateway")
    with LocalGateway(config, workers=settings.env_gateway.workers) as gateway:
        yield gateway.url


async def _catalog(url: str, token: str | None) -> EnvCatalog:
    async with EnvGatewayClient(url, timeout_s=60.0, token=token) as client:
        return await client.envs()


def _task_types(catalog: EnvCatalog, env: str, split: str) -> list[str]:
    info = next((e for e in catalog.envs if e.name == env), None)
    if info is None:
        raise InputError(f"the env gateway serves no env {env!r}; it has {[e.name for e in catalog.envs]}")
    if split not in info.splits:
        raise InputError(f"env {env!r} has no split {split!r}; it has {info.splits}")
    return list(info.task_types)


def _play(
    settings: TurnOPDSettings, url: str, spec: EvalSpec, tasks: list[EpisodeTask], progress: EvalProgress
) -> RolloutResult:
    import ray

    from services.ray_session import ensure_ray
    from services.rollout_worker.pool import RolloutPool

    if not ray.is_initialized():
        progress.stage("starting Ray")
    started_ray = ensure_ray(settings.cluster.rollout_workers * settings.rollout_worker.num_cpus)
    try:
        progress.stage(f"loading {spec.model} into {settings.cluster.rollout_workers} rollout workers")
        pool = RolloutPool(settings.for_rollout_worker(), settings.cluster.rollout_workers, url, spec.model)
        try:
            progress.start(len(tasks))
            return pool.play(
                tasks,
                spec.max_turns,
                spec.temperature,
                pool.weights_version,
                spec.max_new_tokens,
                seed=derive_seed("eval", spec.seed),
                chunk_size=settings.rollout_worker.eval_chunk_episodes,
                on_result=progress.advance,
            )
        finally:
            pool.close()
    finally:
        if started_ray:
            ray.shutdown()
