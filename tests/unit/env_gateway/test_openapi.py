"""The gateway's OpenAPI document says what its routes answer: Prometheus text on /metrics, and for
every error the status and body that the app's one error table answers with."""

from contextlib import asynccontextmanager

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from services.contracts.env_gateway import ActionRejected
from services.contracts.http_errors import ErrorDetail
from services.env_gateway.app import create_app
from services.env_gateway.episode_errors import (
    ActionRejectedError,
    EngineError,
    EpisodeLostError,
    GatewayBusyError,
)
from services.errors import ConflictError, InputError, NotFoundError
from services.settings.env_gateway import EnvGatewaySettings

STEP = "/v1/episodes/{episode_id}/step"


class FailingAPI:
    """An episode runtime whose every episode call raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def create(self, request: object) -> None:
        raise self.error

    async def step(self, episode_id: str, action: str) -> None:
        raise self.error

    async def delete(self, episode_id: str) -> None:
        raise self.error


def app_raising(error: Exception) -> FastAPI:
    @asynccontextmanager
    async def runtime():
        yield FailingAPI(error)

    return create_app(EnvGatewaySettings(), episode_api=runtime)


def documented_bodies(answer: dict) -> list[str]:
    schema = answer["content"]["application/json"]["schema"]
    return [ref["$ref"].rsplit("/", 1)[-1] for ref in schema.get("anyOf", [schema])]


def test_metrics_is_documented_as_prometheus_text_and_its_401_as_json():
    responses = app_raising(RuntimeError()).openapi()["paths"]["/metrics"]["get"]["responses"]
    assert list(responses["200"]["content"]) == ["text/plain"]
    assert responses["200"]["content"]["text/plain"]["schema"] == {"type": "string"}
    assert documented_bodies(responses["401"]) == ["ErrorDetail"]


def test_every_route_documents_its_statuses():
    paths = app_raising(RuntimeError()).openapi()["paths"]
    statuses = {
        (method.upper(), path): sorted(operation["responses"])
        for path, methods in paths.items()
        for method, operation in methods.items()
    }
    assert statuses == {
        ("GET", "/healthz"): ["200", "503"],
        ("GET", "/metrics"): ["200", "401"],
        ("GET", "/v1/envs"): ["200", "401"],
        ("POST", "/v1/episodes"): ["201", "400", "401", "413", "422", "500", "503"],
        ("POST", STEP): ["200", "400", "401", "404", "409", "410", "413", "422", "500"],
        ("DELETE", "/v1/episodes/{episode_id}"): ["204", "401", "404", "422"],
    }
    step_422 = paths[STEP]["post"]["responses"]["422"]
    assert documented_bodies(step_422) == ["InvalidRequest", "ActionRejected", "ErrorDetail"]


@pytest.mark.parametrize(
    ("error", "status", "body"),
    [
        (NotFoundError("no episode 'e1'"), 404, ErrorDetail),
        (ConflictError("episode e1 is finished"), 409, ErrorDetail),
        (EpisodeLostError("episode e1 is gone"), 410, ErrorDetail),
        (ActionRejectedError("'jump' is not admissible", ["unknown verb"], ["look"]), 422, ActionRejected),
        (InputError("not possible on this page"), 422, ErrorDetail),
        (EngineError("engine crashed"), 500, ErrorDetail),
    ],
)
def test_step_answers_each_error_with_its_documented_status_and_body(error, status, body):
    app = app_raising(error)
    documented = app.openapi()["paths"][STEP]["post"]["responses"][str(status)]
    with TestClient(app) as client:
        response = client.post("/v1/episodes/e1/step", json={"action": "jump"})
    assert response.status_code == status
    assert body.__name__ in documented_bodies(documented)
    assert body.model_validate(response.json()).detail == str(error)


def test_a_full_gateway_answers_503_with_the_documented_retry_after():
    app = app_raising(GatewayBusyError("all 2 env workers host 64 episodes"))
    documented = app.openapi()["paths"]["/v1/episodes"]["post"]["responses"]["503"]
    with TestClient(app) as client:
        response = client.post("/v1/episodes", json={"env": "alfworld", "split": "train"})
    assert (response.status_code, response.headers["retry-after"]) == (503, "1")
    assert response.json() == {"detail": "all 2 env workers host 64 episodes"}
    assert documented["headers"]["Retry-After"]["schema"] == {"type": "integer"}
