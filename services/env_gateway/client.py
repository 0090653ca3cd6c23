"""Typed async client of the env gateway, used by rollout workers.

Only connection failures are retried (the request never reached the server, so a retry cannot
play an action twice); every HTTP error becomes the TurnOPD error the server raised.
"""

import asyncio
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from services.contracts.env_gateway import (
    ActionRejected,
    EnvCatalog,
    EpisodeCreate,
    EpisodeStart,
    Health,
    StepRequest,
    StepResult,
)
from services.env_gateway.episode_errors import (
    ActionRejectedError,
    EngineError,
    EpisodeLostError,
    GatewayBusyError,
)
from services.errors import ConflictError, InputError, NotFoundError, TurnOPDError
from services.http_client import AsyncHttpClient

M = TypeVar("M", bound=BaseModel)
_RETRIED = (httpx.ConnectError, httpx.ConnectTimeout)


class EnvGatewayClient(AsyncHttpClient):
    """``async with EnvGatewayClient(url) as env: start = await env.create_episode(...)``.

    ``token``: the service bearer token, sent on every request when the gateway holds one.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 300.0,
        connect_retries: int = 5,
        retry_backoff_s: float = 0.2,
        transport: httpx.AsyncBaseTransport | None = None,
        token: str | None = None,
    ) -> None:
        if connect_retries < 0 or retry_backoff_s < 0:
            raise ValueError("connect_retries and retry_backoff_s must be >= 0")
        super().__init__(base_url=base_url, timeout_s=timeout_s, transport=transport, token=token)
        self._retries = connect_retries
        self._backoff = retry_backoff_s

    async def health(self) -> Health:
        return _parse(Health, await self._request("GET", "/healthz", accept=(200, 503)))

    async def envs(self) -> EnvCatalog:
        return _parse(EnvCatalog, await self._request("GET", "/v1/envs"))

    async def create_episode(self, request: EpisodeCreate) -> EpisodeStart:
        body = request.model_dump(mode="json")
        return _parse(EpisodeStart, await self._request("POST", "/v1/episodes", json=body))

    async def step(self, episode_id: str, action: str) -> StepResult:
        body = StepRequest(action=action).model_dump(mode="json")
        return _parse(StepResult, await self._request("POST", f"/v1/episodes/{episode_id}/step", json=body))

    async def delete_episode(self, episode_id: str) -> None:
        await self._request("DELETE", f"/v1/episodes/{episode_id}")

    async def _request(
        self, method: str, path: str, json: Any = None, accept: tuple[int, ...] = ()
    ) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = await self._http.request(method, path, json=json)
                break
            except _RETRIED:
                if attempt >= self._retries:
                    raise
                await asyncio.sleep(self._backoff * 2**attempt)
                attempt += 1
        if response.is_success or response.status_code in accept:
            return response
        raise _error_of(response)


def _parse(model: type[M], response: httpx.Response) -> M:
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise TurnOPDError(f"env gateway sent a malformed {model.__name__}: {exc}") from None


def _error_of(response: httpx.Response) -> TurnOPDError:
    """The TurnOPD error for an HTTP error answer of the gateway."""
    code = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = {"detail": response.text}
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if code == 422 and isinstance(body, dict) and "problems" in body:
        rejected = ActionRejected.model_validate(body)
        return ActionRejectedError(rejected.detail, rejected.problems, rejected.admissible_actions)
    message = detail if isinstance(detail, str) else f"{detail}"
    match code:
        case 404:
            return NotFoundError(message)
        case 409:
            return ConflictError(message)
        case 410:
            return EpisodeLostError(message)
        case 422 | 400:
            return InputError(message)
        case 503:
            return GatewayBusyError(message)
        case _:
            return EngineError(f"env gateway answered HTTP {code}: {message}")
