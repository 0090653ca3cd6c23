"""Episodes spread over shards (the Ray Serve app's gateway replicas, each with its own worker
pool). A shard owns the game state of its episodes, so every request for an episode must reach
that shard: the episode id carries the shard index (`s<k>-<id on the shard>`), which makes the
router stateless and lets any number of ingress replicas share the work. No Ray import here."""

import asyncio
import itertools

from prometheus_client.parser import text_string_to_metric_families

from services.contracts.env_gateway import EnvCatalog, EpisodeCreate, EpisodeStart, Health, StepResult
from services.env_gateway.episode_api import EpisodeAPI
from services.env_gateway.episode_errors import GatewayBusyError
from services.errors import NotFoundError


def shard_episode_id(shard: int, local_id: str) -> str:
    return f"s{shard}-{local_id}"


def split_episode_id(episode_id: str, shards: int) -> tuple[int, str]:
    """(shard index, id on the shard); NotFoundError for ids no shard can own."""
    prefix, _, local_id = episode_id.partition("-")
    if prefix.startswith("s") and prefix[1:].isdigit() and local_id and int(prefix[1:]) < shards:
        return int(prefix[1:]), local_id
    raise NotFoundError(f"no episode {episode_id!r} (never created, deleted, or expired)")


class ShardRouter:
    """An `EpisodeAPI` over several shard `EpisodeAPI`s; new episodes go round-robin."""

    def __init__(self, shards: list[EpisodeAPI]) -> None:
        if not shards:
            raise ValueError("a shard router needs at least one shard")
        self._shards = shards
        self._next = itertools.cycle(range(len(shards)))

    async def create(self, request: EpisodeCreate) -> EpisodeStart:
        busy: list[str] = []
        for _ in range(len(self._shards)):
            index = next(self._next)
            try:
                start = await self._shards[index].create(request)
            except GatewayBusyError as exc:
                busy.append(f"shard {index}: {exc}")
                continue
            return start.model_copy(update={"episode_id": shard_episode_id(index, start.episode_id)})
        raise GatewayBusyError("every gateway shard is full: " + "; ".join(busy))

    async def step(self, episode_id: str, action: str) -> StepResult:
        index, local_id = split_episode_id(episode_id, len(self._shards))
        return await self._shards[index].step(local_id, action)

    async def delete(self, episode_id: str) -> None:
        index, local_id = split_episode_id(episode_id, len(self._shards))
        await self._shards[index].delete(local_id)

    async def catalog(self) -> EnvCatalog:
        return await self._shards[0].catalog()

    async def health(self) -> Health:
        parts = await asyncio.gather(*(shard.health() for shard in self._shards))
        return Health(
            status="ok" if all(p.status == "ok" for p in parts) else "degraded",
            workers=sum(p.workers for p in parts),
            workers_expected=sum(p.workers_expected for p in parts),
            active_episodes=sum(p.active_episodes for p in parts),
            worker_restarts=sum(p.worker_restarts for p in parts),
            worker_pids=[pid for p in parts for pid in p.worker_pids],
        )

    async def metrics_text(self) -> bytes:
        texts = await asyncio.gather(*(shard.metrics_text() for shard in self._shards))
        return merge_expositions([t.decode() for t in texts]).encode()


def merge_expositions(texts: list[str]) -> str:
    """One Prometheus exposition from one per shard: every sample gains a `shard` label."""
    families: dict[str, tuple[str, str, list[str]]] = {}
    for index, text in enumerate(texts):
        for family in text_string_to_metric_families(text):
            # The parser names counters without their `_total`; the text format wants it back.
            name = f"{family.name}_total" if family.type == "counter" else family.name
            _, _, lines = families.setdefault(name, (family.type, family.documentation, []))
            for sample in family.samples:
                if sample.name.endswith("_created"):  # optional creation timestamps: dropped
                    continue
                labels = {**sample.labels, "shard": str(index)}
                rendered = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
                lines.append(f"{sample.name}{{{rendered}}} {sample.value!r}")
    out = []
    for name, (kind, documentation, lines) in families.items():
        if lines:  # families without samples (e.g. the parser's `_created` gauges) are left out
            out += [f"# HELP {name} {documentation}", f"# TYPE {name} {kind}", *lines]
    return "\n".join(out) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
