"""The FastAPI side of the service token: a route dependency answering 401 without the right bearer.

Apps keep a token provider in ``app.state.service_token`` (called per request, so a Serve replica
can hand over the token its constructor received); a provider returning None disables the check.
"""

from collections.abc import Callable

from fastapi import FastAPI, HTTPException, Request

from services.service_auth import bearer_matches

TokenProvider = Callable[[], str | None]


def set_token_provider(app: FastAPI, provider: TokenProvider) -> None:
    app.state.service_token = provider


def require_service_token(request: Request) -> None:
    """401 unless ``Authorization: Bearer <token>`` matches the app's token (constant-time)."""
    provider: TokenProvider = request.app.state.service_token
    token = provider()
    if token is not None and not bearer_matches(request.headers.get("authorization"), token):
        raise HTTPException(
            status_code=401, detail="missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"}
        )
