"""The env catalog."""

from fastapi import APIRouter

from services.contracts.env_gateway import EnvCatalog
from services.env_gateway.routes.deps import ApiDep
from services.env_gateway.routes.errors import GATEWAY_ERRORS

router = APIRouter(prefix="/v1", tags=["envs"])


@router.get("/envs", response_model=EnvCatalog, responses=GATEWAY_ERRORS.responses(bearer=True))
async def list_envs(api: ApiDep) -> EnvCatalog:
    return await api.catalog()
