"""The FastAPI side of the service token: a route dependency answering 401 without the right bearer.

Apps keep a token provider in ``app.state.service_token`` (called per request, so a Serve replica
can hand over the token its constructor received); a provider returning None disables the check.
``set_token_provider`` also puts the app's own documents (``/openapi.json``, ``/docs``,
``/redoc``) behind the token: with one set, the API's shape is no more public than the API.
"""

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import Response
from starlette.routing import Route

from services.service_auth import bearer_matches

TokenProvider = Callable[[], str | None]
Endpoint = Callable[[Request], Awaitable[Response]]


def set_token_provider(app: FastAPI, provider: TokenProvider) -> None:
    app.state.service_token = provider
    _guard_documents(app)


def require_service_token(request: Request) -> None:
    """401 unless ``Authorization: Bearer <token>`` matches the app's token (constant-time)."""
    provider: TokenProvider = request.app.state.service_token
    token = provider()
    if token is not None and not bearer_matches(request.headers.get("authorization"), token):
        raise HTTPException(
            status_code=401, detail="missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"}
        )


def _guarded(endpoint: Endpoint) -> Endpoint:
    async def guarded(request: Request) -> Response:
        require_service_token(request)
        return await endpoint(request)

    return guarded


def _guard_documents(app: FastAPI) -> None:
    """The routes FastAPI adds for its documents, replaced by ones that check the token first."""
    documents = {app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url} - {None}
    for i, route in enumerate(app.router.routes):
        if type(route) is Route and route.path in documents:
            app.router.routes[i] = Route(
                route.path,
                _guarded(route.endpoint),
                methods=sorted(route.methods or ()),
                name=route.name,
                include_in_schema=False,
            )
