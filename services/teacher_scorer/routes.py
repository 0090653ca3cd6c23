"""HTTP routes of the teacher: ``POST /v1/score``, ``GET /healthz``, ``GET /metrics``.

The app is built around a backend provider, so the same routes serve inside a Serve replica (the
provider returns the replica's deployment object) and in-process (any object with these methods).
Errors are translated here, once: InputError -> 422 with its message, EngineBrokenError -> 503.
With a service token, ``/v1/score`` and ``/metrics`` answer 401 without it; ``/healthz`` stays open.
Request bodies are parsed as JSON into ``ScoreRequest`` only.
"""

from collections.abc import Callable
from typing import Annotated, Protocol

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from services.contracts.teacher import ScoreRequest, ScoreResponse
from services.errors import InputError
from services.http_auth import TokenProvider, require_service_token, set_token_provider
from services.http_validation import install_validation_handler
from services.teacher_scorer.engine import EngineBrokenError


class ScoreBackend(Protocol):
    async def score(self, request: ScoreRequest) -> ScoreResponse: ...

    async def check_health(self) -> None: ...

    def metrics_exposition(self) -> bytes: ...


def _backend(request: Request) -> ScoreBackend:
    provider: Callable[[], ScoreBackend] = request.app.state.backend_provider
    return provider()


Backend = Annotated[ScoreBackend, Depends(_backend)]
router = APIRouter()
_AUTH = [Depends(require_service_token)]


@router.post("/v1/score", response_model=ScoreResponse, dependencies=_AUTH)
async def score(body: ScoreRequest, backend: Backend) -> Response:
    """Top-K teacher log-probs at the given positions of each sequence."""
    result = await backend.score(body)
    return Response(content=result.model_dump_json(), media_type="application/json")


@router.get("/healthz")
async def healthz(backend: Backend) -> dict[str, str]:
    await backend.check_health()
    return {"status": "ok"}


@router.get("/metrics", dependencies=_AUTH)
def metrics(backend: Backend) -> Response:
    return Response(content=backend.metrics_exposition(), media_type=CONTENT_TYPE_LATEST)


async def _input_error(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": str(exc)})


async def _engine_broken(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(status_code=503, content={"detail": f"{exc}; the replica is being replaced, retry"})


def build_http_app(
    backend_provider: Callable[[], ScoreBackend], token_provider: TokenProvider = lambda: None
) -> FastAPI:
    """The FastAPI app of the teacher, answering with whatever ``backend_provider()`` returns."""
    app = FastAPI(title="TurnOPD teacher scorer", version="1")
    app.state.backend_provider = backend_provider
    set_token_provider(app, token_provider)
    app.include_router(router)
    app.add_exception_handler(InputError, _input_error)
    app.add_exception_handler(EngineBrokenError, _engine_broken)
    install_validation_handler(app)
    return app
