"""Liveness and Prometheus metrics."""

from fastapi import APIRouter, Response

from services.contracts.env_gateway import Health
from services.env_gateway.routes.deps import EpisodesDep, RuntimeDep

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
def healthz(episodes: EpisodesDep, response: Response) -> Health:
    health = episodes.health()
    if health.workers == 0:
        response.status_code = 503
    return health


@router.get("/metrics")
def metrics(runtime: RuntimeDep) -> Response:
    runtime.episodes.health()  # refreshes the live-workers gauge
    return Response(runtime.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
