"""Episodes: create, step, delete."""

from fastapi import APIRouter, Response, status

from services.contracts.env_gateway import (
    ActionRejected,
    EpisodeCreate,
    EpisodeStart,
    StepRequest,
    StepResult,
)
from services.env_gateway.routes.deps import ApiDep

router = APIRouter(prefix="/v1/episodes", tags=["episodes"])

_ERRORS: dict[int | str, dict[str, object]] = {
    404: {"description": "Unknown episode."},
    409: {"description": "The episode is finished."},
    410: {"description": "The episode's env worker died; the episode is gone."},
    422: {"description": "Malformed request, or an action that is not admissible.", "model": ActionRejected},
}


@router.post("", response_model=EpisodeStart, status_code=status.HTTP_201_CREATED, responses={503: {}})
async def create_episode(body: EpisodeCreate, api: ApiDep) -> EpisodeStart:
    return await api.create(body)


@router.post("/{episode_id}/step", response_model=StepResult, responses=_ERRORS)
async def step_episode(episode_id: str, body: StepRequest, api: ApiDep) -> StepResult:
    return await api.step(episode_id, body.action)


@router.delete("/{episode_id}", status_code=status.HTTP_204_NO_CONTENT, responses={404: _ERRORS[404]})
async def delete_episode(episode_id: str, api: ApiDep) -> Response:
    await api.delete(episode_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
