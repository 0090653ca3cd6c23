"""What the HTTP routes need from whatever holds the episodes: the local runtime of a standalone
server, or the router of the Ray Serve app that forwards to the shard owning each episode."""

from typing import Protocol

from services.contracts.env_gateway import EnvCatalog, EpisodeCreate, EpisodeStart, Health, StepResult


class EpisodeAPI(Protocol):
    async def create(self, request: EpisodeCreate) -> EpisodeStart: ...

    async def step(self, episode_id: str, action: str) -> StepResult: ...

    async def delete(self, episode_id: str) -> None: ...

    async def catalog(self) -> EnvCatalog: ...

    async def health(self) -> Health: ...

    async def metrics_text(self) -> bytes:
        """Prometheus text exposition."""
        ...
