"""ErrorTable: one table answers errors and documents them; statuses with several bodies are anyOf."""

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from services.contracts.http_errors import ErrorDetail, InvalidRequest
from services.errors import ConflictError, InputError, NotFoundError, TurnOPDError
from services.http_responses import ErrorStatus, ErrorTable


class UnknownStepError(InputError):
    """A refusal with a body of its own."""


def conflict_body(exc: ConflictError) -> ErrorDetail:
    return ErrorDetail(detail=f"conflict: {exc}")


TABLE = ErrorTable(
    ErrorStatus(NotFoundError, 404, "No such thing."),
    ErrorStatus(ConflictError, 409, "Finished.", render=conflict_body),
    ErrorStatus(UnknownStepError, 422, "Unknown step.", InvalidRequest),
    ErrorStatus(InputError, 422, "Refused."),
    ErrorStatus(TurnOPDError, 503, "Busy.", retry_after_s=2),
)


def test_the_most_specific_row_answers_and_unlisted_errors_have_none():
    assert TABLE.row_for(UnknownStepError).description == "Unknown step."
    assert TABLE.row_for(InputError).description == "Refused."
    assert TABLE.row_for(TurnOPDError).status == 503
    with pytest.raises(LookupError, match="ValueError has no row"):
        TABLE.row_for(ValueError)


def test_responses_merge_the_named_errors_with_what_fastapi_answers_itself():
    responses = TABLE.responses(InputError, UnknownStepError, TurnOPDError, request="json", bearer=True)
    assert sorted(responses) == [400, 401, 413, 422, 503]
    assert responses[400]["model"] is ErrorDetail
    assert responses[413]["model"] is ErrorDetail
    assert responses[413]["description"].startswith("The body is larger than the app's limit (refused unread")
    assert responses[401]["headers"] == {
        "WWW-Authenticate": {"description": "`Bearer`.", "schema": {"type": "string"}}
    }
    assert responses[422]["model"] == InvalidRequest | ErrorDetail  # validation, UnknownStep, Refused
    assert responses[422]["description"] == (
        "The request does not parse into the route's models. Or: Refused. Or: Unknown step."
    )
    assert list(responses[503]["headers"]) == ["Retry-After"]
    assert TABLE.responses(NotFoundError, request="params") == {
        404: {"description": "No such thing.", "model": ErrorDetail},
        422: {"description": "The request does not parse into the route's models.", "model": InvalidRequest},
    }
    assert TABLE.responses() == {}


def test_install_answers_each_error_by_its_row():
    app = FastAPI()
    TABLE.install(app)
    errors = {
        "missing": NotFoundError("no x"),
        "done": ConflictError("x is finished"),
        "busy": TurnOPDError("full"),
    }

    @app.get("/{what}")
    async def fail(what: str) -> None:
        raise errors[what]

    client = TestClient(app)
    missing, done, busy = (client.get(f"/{what}") for what in ("missing", "done", "busy"))
    assert (missing.status_code, missing.json()) == (404, {"detail": "no x"})
    assert (done.status_code, done.json()) == (409, {"detail": "conflict: x is finished"})
    assert (busy.status_code, busy.json(), busy.headers["retry-after"]) == (503, {"detail": "full"}, "2")
