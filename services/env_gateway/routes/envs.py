"""The env catalog."""

from fastapi import APIRouter

from services.contracts.env_gateway import EnvCatalog
from services.env_gateway.routes.deps import EpisodesDep

router = APIRouter(prefix="/v1", tags=["envs"])


@router.get("/envs", response_model=EnvCatalog)
def list_envs(episodes: EpisodesDep) -> EnvCatalog:
    return episodes.catalog()
