"""Route dependencies: the replica's runtime objects, from the app state."""

from typing import Annotated

from fastapi import Depends, Request

from services.env_gateway.episodes import EpisodeService
from services.env_gateway.runtime import GatewayRuntime


def get_runtime(request: Request) -> GatewayRuntime:
    runtime: GatewayRuntime = request.app.state.runtime
    return runtime


def get_episodes(request: Request) -> EpisodeService:
    return get_runtime(request).episodes


RuntimeDep = Annotated[GatewayRuntime, Depends(get_runtime)]
EpisodesDep = Annotated[EpisodeService, Depends(get_episodes)]
