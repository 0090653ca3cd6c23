"""`turnopd serve webshop`: the generated shop behind AgentGym's `agentenv_webshop` HTTP protocol
(`services.envs.webshop.contract`), so the gateway's remote adapter can be run and tested
against a real separate server. Unknown envs answer 404, out-of-range goal ids 422, and a server
with every env slot taken answers 503 (``SHOP_ERRORS``, which also documents them).
"""

from pathlib import Path
from typing import Annotated

import uvicorn
from fastapi import Depends, FastAPI, Request

from services.envs.webshop.backend import load_shop
from services.envs.webshop.contract import (
    AvailableActions,
    CloseQuery,
    CloseResponse,
    ResetQuery,
    ResetResponse,
    StateResponse,
    StepQuery,
    StepResponse,
)
from services.envs.webshop.server_envs import ServerBusyError, ShopEnvs
from services.envs.webshop.settings import WebShopSettings
from services.errors import InputError, NotFoundError, TurnOPDError
from services.http_responses import ErrorStatus, ErrorTable
from services.http_validation import install_validation_handler

SHOP_ERRORS = ErrorTable(
    ErrorStatus(NotFoundError, 404, "No such env (never created, or closed)."),
    ErrorStatus(InputError, 422, "A goal id outside the shop's goals."),
    ErrorStatus(ServerBusyError, 503, "Every env slot is taken; close one first."),
    ErrorStatus(TurnOPDError, 500, "The shop failed."),
)
_UNKNOWN_ENV = SHOP_ERRORS.responses(NotFoundError, request="params")


def _envs(request: Request) -> ShopEnvs:
    envs: ShopEnvs = request.app.state.envs
    return envs


EnvsDep = Annotated[ShopEnvs, Depends(_envs)]


def create_app(envs: ShopEnvs) -> FastAPI:
    """The server app over ``envs`` (handlers are async: sessions are only touched on the event loop)."""
    app = FastAPI(title="TurnOPD webshop (agentenv_webshop protocol)", version="1.0.0")
    app.state.envs = envs

    @app.get("/")
    async def alive() -> str:
        return "ok"

    @app.get("/list_envs")
    async def list_envs(envs: EnvsDep) -> list[int]:
        return envs.indices()

    @app.post("/create", responses=SHOP_ERRORS.responses(ServerBusyError))
    async def create(envs: EnvsDep) -> int:
        return envs.create()

    @app.post("/reset", responses=SHOP_ERRORS.responses(NotFoundError, InputError, request="json"))
    async def reset(query: ResetQuery, envs: EnvsDep) -> ResetResponse:
        return [envs.reset(query.env_idx, query.session_id).observation(), None]

    @app.post("/step", responses=SHOP_ERRORS.responses(NotFoundError, request="json"))
    async def step(query: StepQuery, envs: EnvsDep) -> StepResponse:
        session = envs.get(query.env_idx)
        result = session.step(query.action)
        return StepResponse(state=session.observation(), reward=result.reward, done=result.done)

    @app.get("/available_actions", responses=_UNKNOWN_ENV)
    async def available_actions(env_idx: int, envs: EnvsDep) -> AvailableActions:
        session = envs.get(env_idx)
        return AvailableActions(has_search_bar=session.has_search_bar, clickables=session.clickables())

    @app.get("/instruction_text", responses=_UNKNOWN_ENV)
    async def instruction_text(env_idx: int, envs: EnvsDep) -> str:
        return envs.get(env_idx).instruction

    @app.get("/observation", responses=_UNKNOWN_ENV)
    async def observation(env_idx: int, envs: EnvsDep) -> str:
        return envs.get(env_idx).observation()

    @app.get("/state", responses=_UNKNOWN_ENV)
    async def state(env_idx: int, envs: EnvsDep) -> StateResponse:
        session = envs.get(env_idx)
        return StateResponse(
            url=f"webshop://{env_idx}/{session.page_kind}",
            html=session.observation(),
            instruction_text=session.instruction,
        )

    @app.post("/close", responses=SHOP_ERRORS.responses(request="json"))
    async def close(query: CloseQuery, envs: EnvsDep) -> CloseResponse:
        return CloseResponse(closed=envs.close(query.env_idx))

    SHOP_ERRORS.install(app)
    install_validation_handler(app)
    return app


def serve_webshop(ws: WebShopSettings, cache_dir: Path) -> None:
    """Generate (or load) the shop into ``cache_dir`` (or load it from there), then serve it until interrupted."""
    shop = load_shop(ws, cache_dir)
    shop.build_index()
    envs = ShopEnvs(shop, ws.server_max_envs)
    uvicorn.run(create_app(envs), host=ws.server_host, port=ws.server_port, log_level="warning")
