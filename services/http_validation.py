"""422 answers for request bodies that fail validation, safe for any bytes a client sends.

FastAPI's own handler echoes the offending input back, and crashes (HTTP 500) when that input is
binary (say, a pickle posted as ``application/octet-stream``). Bodies are only ever parsed as
JSON into pydantic models; whatever else arrives is refused here, unread. The body is the
documented ``InvalidRequest``: the offending input comes back only when it is a finite JSON scalar.
"""

import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from services.contracts.http_errors import InvalidField, InvalidRequest


def _invalid_field(error: dict[str, Any]) -> InvalidField:
    value = error.get("input")
    echoed = isinstance(value, str | int | bool) or (isinstance(value, float) and math.isfinite(value))
    return InvalidField.model_validate(
        {"type": error["type"], "loc": list(error["loc"]), "msg": error["msg"]}
        | ({"input": value} if echoed else {})
    )


async def _invalid_request(_: Request, exc: Exception) -> JSONResponse:
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    body = InvalidRequest(detail=[_invalid_field(error) for error in errors])
    return JSONResponse(status_code=422, content=body.model_dump(exclude_unset=True))


def install_validation_handler(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _invalid_request)
