"""The 422 answer to a request that does not parse: the documented InvalidRequest, whatever arrives."""

from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel

from services.contracts.http_errors import InvalidRequest
from services.http_validation import install_validation_handler


class Body(BaseModel):
    count: int
    names: list[str]


def client() -> TestClient:
    app = FastAPI()
    install_validation_handler(app)

    @app.post("/things")
    async def things(body: Body) -> int:
        return body.count

    return TestClient(app)


def test_the_answer_is_an_invalid_request_echoing_scalar_inputs_only():
    response = client().post("/things", json={"count": "many", "names": {"a": 1}})
    assert response.status_code == 422
    assert InvalidRequest.model_validate(response.json())  # the documented shape, nothing more
    assert response.json()["detail"] == [
        {
            "type": "int_parsing",
            "loc": ["body", "count"],
            "msg": "Input should be a valid integer, unable to parse string as an integer",
            "input": "many",
        },
        {"type": "list_type", "loc": ["body", "names"], "msg": "Input should be a valid list"},
    ]


def test_a_nan_in_the_body_is_a_422_not_a_crash():
    # JSON parsing takes NaN; echoing it back cannot be rendered as JSON (FastAPI's handler: HTTP 500).
    response = client().post(
        "/things", content=b'{"count": NaN, "names": []}', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {"type": "finite_number", "loc": ["body", "count"], "msg": "Input should be a finite number"}
        ]
    }
