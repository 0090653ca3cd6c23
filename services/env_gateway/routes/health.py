"""Liveness (open) and Prometheus metrics (behind the service token when one is set)."""

from fastapi import APIRouter, Response

from services.contracts.env_gateway import Health
from services.env_gateway.routes.deps import ApiDep
from services.env_gateway.routes.errors import GATEWAY_ERRORS
from services.http_responses import PROMETHEUS_TEXT

router = APIRouter(tags=["health"])
metrics_router = APIRouter(tags=["health"])


@router.get(
    "/healthz",
    response_model=Health,
    responses={503: {"model": Health, "description": "No env worker is alive."}},
)
async def healthz(api: ApiDep, response: Response) -> Health:
    health = await api.health()
    if health.workers == 0:
        response.status_code = 503
    return health


@metrics_router.get(
    "/metrics", response_class=Response, responses=PROMETHEUS_TEXT | GATEWAY_ERRORS.responses(bearer=True)
)
async def metrics(api: ApiDep) -> Response:
    return Response(await api.metrics_text(), media_type="text/plain; version=0.0.4; charset=utf-8")
