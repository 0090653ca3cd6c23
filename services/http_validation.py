"""422 answers for request bodies that fail validation, safe for any bytes a client sends.

FastAPI's own handler echoes the offending input back, and crashes (HTTP 500) when that input is
binary (say, a pickle posted as ``application/octet-stream``). Bodies are only ever parsed as
JSON into pydantic models; whatever else arrives is refused here, unread.
"""

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


async def _invalid_request(_: Request, exc: Exception) -> JSONResponse:
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    detail = [
        {key: value for key, value in error.items() if key in ("type", "loc", "msg")}
        | ({"input": error["input"]} if isinstance(error.get("input"), str | int | float | bool) else {})
        for error in errors
    ]
    return JSONResponse(status_code=422, content={"detail": detail})


def install_validation_handler(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _invalid_request)
