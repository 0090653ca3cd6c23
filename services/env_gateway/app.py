"""The env gateway's FastAPI app: one factory used by uvicorn and by the Ray Serve deployment.

With a service token every route but ``/healthz`` answers 401 without ``Authorization: Bearer``.
A body above ``[env_gateway] max_body_bytes`` is refused unread (413).
"""

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import Depends, FastAPI

from services.env_gateway.episode_api import EpisodeAPI
from services.env_gateway.routes import envs, episodes, health
from services.env_gateway.routes.errors import GATEWAY_ERRORS
from services.env_gateway.runtime import local_runtime
from services.http_auth import require_service_token, set_token_provider
from services.http_limits import body_cap, install_limits
from services.http_validation import install_validation_handler
from services.settings.env_gateway import EnvGatewaySettings

API_VERSION = "1.0.0"

EpisodeAPIFactory = Callable[[], AbstractAsyncContextManager[EpisodeAPI]]


def create_app(
    settings: EnvGatewaySettings, episode_api: EpisodeAPIFactory | None = None, token: str | None = None
) -> FastAPI:
    """A gateway app. By default its lifespan runs a local runtime (the env worker pool of this
    process); the Ray Serve ingress passes a factory of its shard router instead. ``token``: the
    bearer every request but ``/healthz`` must carry (None: open, for loopback binds only), also
    sent by the local runtime's env workers to the retrieval and webshop servers."""
    factory = episode_api or (lambda: local_runtime(settings, token))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with factory() as api:
            app.state.episode_api = api
            yield

    app = FastAPI(
        title="TurnOPD env gateway",
        version=API_VERSION,
        description="Household (ALFWorld), TextWorld and multi-hop search games for rollout workers, one episode at a time.",
        lifespan=lifespan,
    )
    set_token_provider(app, lambda: token)
    auth = [Depends(require_service_token)]
    app.include_router(health.router)
    app.include_router(health.metrics_router, dependencies=auth)
    app.include_router(envs.router, dependencies=auth)
    app.include_router(episodes.router, dependencies=auth)
    GATEWAY_ERRORS.install(app)
    install_validation_handler(app)
    install_limits(app, body_cap(settings.max_body_bytes, "[env_gateway] max_body_bytes"))
    return app
