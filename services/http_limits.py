"""What one request may ask of a TurnOPD HTTP app, said once for every app: a body-size limit
enforced before the body is read, and caps on the counts a request names (sequences, positions,
queries, ...). Each is a setting of its service; a request beyond one is answered 413
(``ErrorDetail`` naming the count, the cap and its setting) and never reaches the work.

FastAPI reads and decodes the whole body before it runs a route's dependencies, the token check
included, so the body limit is an ASGI middleware around the app: a ``Content-Length`` above the
limit is refused unread, and a body streamed without one is counted chunk by chunk and refused as
soon as it passes the limit. ``install_limits`` adds the middleware and lists every cap in the
app's OpenAPI description, so ``/openapi.json`` states them.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.errors import InputError


class OverLimitError(InputError):
    """A request asks for more than one of its app's caps allows (HTTP 413)."""


class BodyTooLargeError(HTTPException):
    """A request body passed the app's limit while it was read; an ``HTTPException``, so FastAPI's
    body reader hands it on as a 413 instead of turning it into a 400."""

    def __init__(self, detail: str) -> None:
        super().__init__(status_code=413, detail=detail)


@dataclass(frozen=True)
class Cap:
    """One cap of an app: ``what`` it bounds, its ``value``, the ``setting`` that sets it, and the
    ``status`` a request beyond it gets."""

    what: str
    value: int
    setting: str
    status: int = 413

    def check(self, count: int) -> None:
        """Raise OverLimitError when ``count`` exceeds the cap."""
        if count > self.value:
            raise OverLimitError(f"{count} {self.what}; at most {self.value} ({self.setting})")


def body_cap(value: int, setting: str) -> Cap:
    return Cap("bytes of request body", value, setting)


class BodyLimitMiddleware:
    """Refuses a request body above ``limit.value`` bytes with 413 before the app reads it."""

    def __init__(self, app: ASGIApp, limit: Cap) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit.value:
            await self._refuse(scope, receive, send, f"a request body of {declared} bytes")
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit.value:
                    raise BodyTooLargeError(self._detail(f"a request body of at least {received} bytes"))
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except BodyTooLargeError:
            # Raised where no exception handler answers it (outside a route): answer here.
            if started:
                raise
            await self._refuse(scope, receive, send, f"a request body of at least {received} bytes")

    def _detail(self, body: str) -> str:
        return f"{body} exceeds the limit of {self.limit.value} bytes ({self.limit.setting})"

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, body: str) -> None:
        response = JSONResponse(
            {"detail": self._detail(body)}, status_code=413, headers={"Connection": "close"}
        )
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    value = Headers(scope=scope).get("content-length")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None  # the server refuses a malformed length before the app sees the request


def limits_markdown(caps: Sequence[Cap]) -> str:
    """The caps as the Markdown table the app's OpenAPI description carries."""
    rows = [f"| {cap.what} | {cap.value} | `{cap.setting}` | {cap.status} |" for cap in caps]
    header = [
        "**Limits** (each a setting):",
        "",
        "| what | at most | setting | beyond it |",
        "|---|---|---|---|",
    ]
    return "\n".join([*header, *rows])


def install_limits(app: FastAPI, body: Cap, caps: Sequence[Cap] = ()) -> None:
    """Limit ``app``'s request bodies to ``body`` and state it and ``caps`` in its OpenAPI document."""
    app.add_middleware(BodyLimitMiddleware, limit=body)
    text = limits_markdown([body, *caps])
    app.description = f"{app.description}\n\n{text}" if app.description else text
