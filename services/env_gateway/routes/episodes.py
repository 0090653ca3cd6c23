"""Episodes: create, step, delete."""

from fastapi import APIRouter, Response, status

from services.contracts.env_gateway import EpisodeCreate, EpisodeStart, StepRequest, StepResult
from services.env_gateway.episode_errors import (
    ActionRejectedError,
    EngineError,
    EpisodeLostError,
    GatewayBusyError,
)
from services.env_gateway.routes.deps import ApiDep
from services.env_gateway.routes.errors import GATEWAY_ERRORS
from services.errors import ConfigError, ConflictError, InputError, NotFoundError

router = APIRouter(prefix="/v1/episodes", tags=["episodes"])


@router.post(
    "",
    response_model=EpisodeStart,
    status_code=status.HTTP_201_CREATED,
    responses=GATEWAY_ERRORS.responses(
        InputError, GatewayBusyError, ConfigError, EngineError, request="json", bearer=True
    ),
)
async def create_episode(body: EpisodeCreate, api: ApiDep) -> EpisodeStart:
    return await api.create(body)


@router.post(
    "/{episode_id}/step",
    response_model=StepResult,
    responses=GATEWAY_ERRORS.responses(
        NotFoundError,
        ConflictError,
        EpisodeLostError,
        ActionRejectedError,
        InputError,
        EngineError,
        request="json",
        bearer=True,
    ),
)
async def step_episode(episode_id: str, body: StepRequest, api: ApiDep) -> StepResult:
    return await api.step(episode_id, body.action)


@router.delete(
    "/{episode_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=GATEWAY_ERRORS.responses(NotFoundError, request="params", bearer=True),
)
async def delete_episode(episode_id: str, api: ApiDep) -> Response:
    await api.delete(episode_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
