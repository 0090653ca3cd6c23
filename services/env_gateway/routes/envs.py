"""The env catalog."""

from fastapi import APIRouter

from services.contracts.env_gateway import EnvCatalog
from services.env_gateway.routes.deps import ApiDep

router = APIRouter(prefix="/v1", tags=["envs"])


@router.get("/envs", response_model=EnvCatalog)
async def list_envs(api: ApiDep) -> EnvCatalog:
    return await api.catalog()
