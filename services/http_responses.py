"""What TurnOPD's HTTP apps answer besides their success models, said once for both the code and the
OpenAPI document.

Each app keeps one ``ErrorTable``: which error class answers which status, with which body (most
specific class first). ``ErrorTable.install`` makes it the app's exception handler, so errors are
translated once, at the boundary; ``ErrorTable.responses`` builds a route's ``responses=`` from the
same rows: the errors the route names, plus what FastAPI, the body limit and the bearer check
answer on their own (400 for a JSON body that is not text, 413 for one above the app's limit
(``services.http_limits``), 422 ``InvalidRequest`` for input that does not parse, 401 without the
bearer). A status reached by several body shapes (the env gateway's 422) is documented
as any of them. ``PROMETHEUS_TEXT`` documents a ``/metrics`` answer as the text it is.
"""

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from services.contracts.http_errors import ErrorDetail, InvalidRequest

Responses = dict[int | str, dict[str, Any]]
RequestKind = Literal["none", "params", "json"]
"""What a route reads: nothing, path or query parameters only, or a JSON body (and maybe parameters)."""


def detail_of(exc: Exception) -> ErrorDetail:
    return ErrorDetail(detail=str(exc))


@dataclass(frozen=True)
class ErrorStatus:
    """One row of an error table: ``error`` (and its subclasses) answers ``status`` with ``body``."""

    error: type[Exception]
    status: int
    description: str
    body: type[BaseModel] = ErrorDetail
    render: Callable[[Any], BaseModel] = detail_of
    retry_after_s: int | None = None


@dataclass(frozen=True)
class _Answer:
    description: str
    body: type[BaseModel]
    headers: tuple[tuple[str, str, str], ...] = ()  # (name, JSON schema type, description)


_BODY_NOT_TEXT = _Answer("The body is not JSON text (for instance, not UTF-8).", ErrorDetail)
_INVALID = _Answer("The request does not parse into the route's models.", InvalidRequest)
_BODY_TOO_LARGE = _Answer(
    "The body is larger than the app's limit (refused unread; the API description lists the limits).",
    ErrorDetail,
)
_NO_BEARER = _Answer(
    "The server has a service token and the request lacks `Authorization: Bearer <token>`.",
    ErrorDetail,
    (("WWW-Authenticate", "string", "`Bearer`."),),
)

PROMETHEUS_TEXT: Responses = {
    200: {
        "description": "Prometheus text exposition format.",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
}
"""A ``/metrics`` route's 200; the route also needs ``response_class=Response`` so FastAPI documents
no JSON body for it (and its error answers stay JSON)."""


class ErrorTable:
    def __init__(self, *rows: ErrorStatus) -> None:
        self.rows = rows

    def row_for(self, error: type[Exception]) -> ErrorStatus:
        """The row that answers ``error``: the first whose class it is or derives from."""
        row = next((r for r in self.rows if issubclass(error, r.error)), None)
        if row is None:
            raise LookupError(f"{error.__name__} has no row in this error table")
        return row

    def install(self, app: FastAPI) -> None:
        """Answer every error class of the table by its row."""
        for error in dict.fromkeys(row.error for row in self.rows):
            app.add_exception_handler(error, self._answer)

    async def _answer(self, _: Request, exc: Exception) -> JSONResponse:
        row = self.row_for(type(exc))
        headers = {"Retry-After": str(row.retry_after_s)} if row.retry_after_s is not None else None
        return JSONResponse(row.render(exc).model_dump(mode="json"), status_code=row.status, headers=headers)

    def responses(
        self, *errors: type[Exception], request: RequestKind = "none", bearer: bool = False
    ) -> Responses:
        """``responses=`` of a route that raises ``errors``, reads ``request`` and may sit behind the bearer."""
        answers: dict[int, list[_Answer]] = {}
        if request == "json":
            answers.setdefault(400, []).append(_BODY_NOT_TEXT)
            answers.setdefault(413, []).append(_BODY_TOO_LARGE)
        if bearer:
            answers.setdefault(401, []).append(_NO_BEARER)
        if request != "none":
            answers.setdefault(422, []).append(_INVALID)
        for row in dict.fromkeys(self.row_for(error) for error in errors):
            retry = (("Retry-After", "integer", "Seconds to wait before retrying."),)
            answer = _Answer(row.description, row.body, retry if row.retry_after_s is not None else ())
            answers.setdefault(row.status, []).append(answer)
        return {status: _documented(answers[status]) for status in sorted(answers)}


def _documented(answers: list[_Answer]) -> dict[str, Any]:
    bodies = list(dict.fromkeys(a.body for a in answers))
    documented: dict[str, Any] = {
        "description": " Or: ".join(a.description for a in answers),
        # One model, or the union of the shapes this status can carry (documented as anyOf).
        "model": functools.reduce(operator.or_, bodies),
    }
    headers = {name: (kind, text) for a in answers for name, kind, text in a.headers}
    if headers:
        documented["headers"] = {
            name: {"description": text, "schema": {"type": kind}} for name, (kind, text) in headers.items()
        }
    return documented
