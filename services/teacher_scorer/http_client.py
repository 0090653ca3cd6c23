"""HTTP client of the teacher (async httpx), retrying on connection errors and 503 only."""

import asyncio
import logging

import httpx

from services.contracts.teacher import ScoreRequest, ScoreResponse
from services.errors import InputError, TurnOPDError
from services.http_client import AsyncHttpClient
from services.teacher_scorer.retry import RetryPolicy

log = logging.getLogger(__name__)

# Failures where the request certainly or possibly never completed; scoring is idempotent, so
# sending it again is safe. Read timeouts are not here: a slow teacher is not helped by a resend.
RETRYABLE_ERRORS = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
)


class TeacherHttpError(TurnOPDError, RuntimeError):
    """The teacher answered with an error that a retry cannot fix."""


class TeacherHttpClient(AsyncHttpClient):
    """``POST {base_url}/v1/score`` with bounded retries; use as an async context manager.

    ``token``: the service bearer token, sent on every request when the teacher holds one.
    """

    def __init__(
        self,
        base_url: str,
        *,
        policy: RetryPolicy | None = None,
        timeout_s: float = 300.0,
        transport: httpx.AsyncBaseTransport | None = None,
        token: str | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._policy = policy or RetryPolicy()
        super().__init__(timeout_s=timeout_s, transport=transport, token=token)
        self.retries = 0

    async def score(self, request: ScoreRequest) -> ScoreResponse:
        """Score ``request``; InputError (4xx) names the problem, TeacherHttpError for other failures."""
        # exclude_unset: an unset top_k lets the server apply its configured distill_topk.
        body = request.model_dump_json(exclude_unset=True)
        response = await self._post("/v1/score", body)
        return ScoreResponse.model_validate_json(response.content)

    async def healthy(self) -> bool:
        """True when ``GET /healthz`` answers 200."""
        try:
            response = await self._http.get(f"{self._base_url}/healthz")
        except httpx.TransportError:
            return False
        return response.status_code == 200

    async def _post(self, path: str, body: str) -> httpx.Response:
        url = f"{self._base_url}{path}"
        for attempt in range(1, self._policy.max_attempts + 1):
            last = attempt == self._policy.max_attempts
            try:
                response = await self._http.post(
                    url, content=body, headers={"content-type": "application/json"}
                )
            except RETRYABLE_ERRORS as exc:
                if last:
                    raise TeacherHttpError(
                        f"teacher at {url} unreachable after {attempt} attempts: {exc}"
                    ) from exc
                reason = type(exc).__name__
            else:
                if response.status_code < 400:
                    return response
                detail = error_detail(response)
                if 400 <= response.status_code < 500:
                    raise InputError(f"teacher rejected the request ({response.status_code}): {detail}")
                if response.status_code != 503 or last:
                    raise TeacherHttpError(f"teacher at {url} failed ({response.status_code}): {detail}")
                reason = "503"
            self.retries += 1
            delay = self._policy.delay(attempt)
            log.warning("teacher HTTP call failed (%s), retry %d in %.1fs", reason, attempt, delay)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")


def error_detail(response: httpx.Response) -> str:
    """The error message of a failed answer: its JSON `detail` (or the whole JSON), else its text."""
    try:
        payload = response.json()
    except ValueError:
        return response.text[:500]
    detail = payload.get("detail", payload) if isinstance(payload, dict) else payload
    return str(detail)[:2000]
