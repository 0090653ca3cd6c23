"""`turnopd serve webshop`: the generated shop behind AgentGym's `agentenv_webshop` HTTP protocol
(`services.envs.webshop.contract`), so the gateway's remote adapter can be run and tested
against a real separate server. Unknown (or expired) envs answer 404, out-of-range goal ids 422,
an action or body above its cap 413, and a server with every env slot taken answers 503
(``SHOP_ERRORS``, which also documents them). With a service token every route but ``/`` answers
401 without it; bound beyond the loopback the server refuses to start without one.
"""

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

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
from services.http_auth import require_service_token, set_token_provider
from services.http_limits import Cap, OverLimitError, body_cap, install_limits
from services.http_responses import ErrorStatus, ErrorTable
from services.http_server import run_http_server
from services.http_validation import install_validation_handler
from services.service_auth import check_bind

SHOP_ERRORS = ErrorTable(
    ErrorStatus(NotFoundError, 404, "No such env (never created, closed, or expired unused)."),
    ErrorStatus(OverLimitError, 413, "An action longer than the server's cap."),
    ErrorStatus(InputError, 422, "A goal id outside the shop's goals."),
    ErrorStatus(ServerBusyError, 503, "Every env slot is taken; close one first."),
    ErrorStatus(TurnOPDError, 500, "The shop failed."),
)
_UNKNOWN_ENV = SHOP_ERRORS.responses(NotFoundError, request="params", bearer=True)
T = TypeVar("T")


class ShopWork:
    """The app's envs, worked on one request at a time in a worker thread, so searches and page
    rendering never hold the event loop (sessions are not safe to share between threads)."""

    def __init__(self, envs: ShopEnvs) -> None:
        self.envs = envs
        self._lock = asyncio.Lock()

    async def run(self, work: Callable[[ShopEnvs], T]) -> T:
        async with self._lock:
            return await asyncio.to_thread(work, self.envs)


def _work(request: Request) -> ShopWork:
    work: ShopWork = request.app.state.work
    return work


Work = Annotated[ShopWork, Depends(_work)]


def _stepped(envs: ShopEnvs, query: StepQuery) -> StepResponse:
    session = envs.get(query.env_idx)
    result = session.step(query.action)
    return StepResponse(state=session.observation(), reward=result.reward, done=result.done)


def _state(envs: ShopEnvs, env_idx: int) -> StateResponse:
    session = envs.get(env_idx)
    return StateResponse(
        url=f"webshop://{env_idx}/{session.page_kind}",
        html=session.observation(),
        instruction_text=session.instruction,
    )


def create_app(envs: ShopEnvs, settings: WebShopSettings | None = None, token: str | None = None) -> FastAPI:
    """The server app over ``envs``, with ``settings``' caps (None: the defaults); ``token``: the
    bearer every route but ``/`` demands (None: open, loopback only)."""
    ws = settings or WebShopSettings()
    action_cap = Cap(
        "characters of a /step action",
        ws.server_max_action_chars,
        "[env_gateway.webshop] server_max_action_chars",
    )
    app = FastAPI(title="TurnOPD webshop (agentenv_webshop protocol)", version="1.0.0")
    app.state.work = ShopWork(envs)
    set_token_provider(app, lambda: token)
    auth = [Depends(require_service_token)]

    @app.get("/")
    async def alive() -> str:
        return "ok"

    @app.get("/list_envs", dependencies=auth, responses=SHOP_ERRORS.responses(bearer=True))
    async def list_envs(work: Work) -> list[int]:
        return await work.run(lambda envs: envs.indices())

    @app.post("/create", dependencies=auth, responses=SHOP_ERRORS.responses(ServerBusyError, bearer=True))
    async def create(work: Work) -> int:
        return await work.run(lambda envs: envs.create())

    @app.post(
        "/reset",
        dependencies=auth,
        responses=SHOP_ERRORS.responses(NotFoundError, InputError, request="json", bearer=True),
    )
    async def reset(query: ResetQuery, work: Work) -> ResetResponse:
        return [await work.run(lambda envs: envs.reset(query.env_idx, query.session_id).observation()), None]

    @app.post(
        "/step",
        dependencies=auth,
        responses=SHOP_ERRORS.responses(NotFoundError, OverLimitError, request="json", bearer=True),
    )
    async def step(query: StepQuery, work: Work) -> StepResponse:
        action_cap.check(len(query.action))
        return await work.run(lambda envs: _stepped(envs, query))

    @app.get("/available_actions", dependencies=auth, responses=_UNKNOWN_ENV)
    async def available_actions(env_idx: int, work: Work) -> AvailableActions:
        def actions(envs: ShopEnvs) -> AvailableActions:
            session = envs.get(env_idx)
            return AvailableActions(has_search_bar=session.has_search_bar, clickables=session.clickables())

        return await work.run(actions)

    @app.get("/instruction_text", dependencies=auth, responses=_UNKNOWN_ENV)
    async def instruction_text(env_idx: int, work: Work) -> str:
        return await work.run(lambda envs: envs.get(env_idx).instruction)

    @app.get("/observation", dependencies=auth, responses=_UNKNOWN_ENV)
    async def observation(env_idx: int, work: Work) -> str:
        return await work.run(lambda envs: envs.get(env_idx).observation())

    @app.get("/state", dependencies=auth, responses=_UNKNOWN_ENV)
    async def state(env_idx: int, work: Work) -> StateResponse:
        return await work.run(lambda envs: _state(envs, env_idx))

    @app.post("/close", dependencies=auth, responses=SHOP_ERRORS.responses(request="json", bearer=True))
    async def close(query: CloseQuery, work: Work) -> CloseResponse:
        return CloseResponse(closed=await work.run(lambda envs: envs.close(query.env_idx)))

    SHOP_ERRORS.install(app)
    install_validation_handler(app)
    install_limits(
        app, body_cap(ws.server_max_body_bytes, "[env_gateway.webshop] server_max_body_bytes"), [action_cap]
    )
    return app


def serve_webshop(ws: WebShopSettings, cache_dir: Path, token: str | None = None) -> None:
    """Generate (or load) the shop into ``cache_dir`` (or load it from there), then serve it until
    interrupted; beyond the loopback only with a ``token`` (checked before the shop is built)."""
    check_bind(ws.server_host, token, "webshop server")
    shop = load_shop(ws, cache_dir)
    shop.build_index()
    envs = ShopEnvs(shop, ws.server_max_envs, ttl_s=ws.server_env_ttl_s)
    app = create_app(envs, ws, token)
    run_http_server(app, ws.server_host, ws.server_port, token, "webshop server", log_level="warning")
