"""The gateway app behind the service token: 401 without it, the client sends it, /healthz stays open,
and the standalone server refuses to listen beyond the loopback without one."""

import asyncio
import pickle
from contextlib import asynccontextmanager

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from services.contracts.env_gateway import EnvCatalog, EpisodeCreate, EpisodeStart, Health, StepResult
from services.env_gateway import main as gateway_main
from services.env_gateway.app import create_app
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.metrics import GatewayMetrics
from services.errors import ConfigError
from services.settings.env_gateway import EnvGatewaySettings

TOKEN = "gw-s3cret"


class RecordingAPI:
    """Glue stand-in for the episode runtime: records what reached it."""

    def __init__(self) -> None:
        self.created: list[EpisodeCreate] = []
        self.metrics = GatewayMetrics()

    async def create(self, request: EpisodeCreate) -> EpisodeStart:
        self.created.append(request)
        self.metrics.episodes_created.labels(request.env, request.split).inc()
        return EpisodeStart(
            episode_id="e1",
            observation="o",
            objective="x.",
            admissible_actions=["look"],
            task_type="pick_and_place",
            game_id="g",
            seed=request.seed or 0,
        )

    async def step(self, episode_id: str, action: str) -> StepResult:
        return StepResult(observation="o", reward=0, done=False, won=False, admissible_actions=[], turn=1)

    async def delete(self, episode_id: str) -> None:
        return None

    async def catalog(self) -> EnvCatalog:
        return EnvCatalog(envs=[])

    async def health(self) -> Health:
        return Health(
            status="ok", workers=1, workers_expected=1, active_episodes=0, worker_restarts=0, worker_pids=[1]
        )

    async def metrics_text(self) -> bytes:
        return self.metrics.render()


def app_with(api: RecordingAPI, token: str | None):
    @asynccontextmanager
    async def factory():
        yield api

    return create_app(EnvGatewaySettings(), episode_api=factory, token=token)


BODY = {"env": "alfworld", "split": "train", "seed": 3}


def test_with_a_token_every_route_but_healthz_needs_it():
    api = RecordingAPI()
    with TestClient(app_with(api, TOKEN)) as client:
        assert client.get("/healthz").status_code == 200
        for method, path in [("GET", "/v1/envs"), ("GET", "/metrics"), ("POST", "/v1/episodes")]:
            missing = client.request(method, path, json=BODY)
            wrong = client.request(method, path, json=BODY, headers={"Authorization": "Bearer nope"})
            assert (missing.status_code, wrong.status_code) == (401, 401), path
            assert missing.json()["detail"] == "missing or wrong bearer token"
        assert api.created == []  # nothing reached the runtime
        auth = {"Authorization": f"Bearer {TOKEN}"}
        assert client.post("/v1/episodes", json=BODY, headers=auth).status_code == 201
        assert client.get("/v1/envs", headers=auth).json() == {"envs": []}
        metrics = client.get("/metrics", headers=auth).text
    assert 'turnopd_env_episodes_created_total{env="alfworld",split="train"} 1.0' in metrics
    assert api.created == [EpisodeCreate(**BODY)]


def test_without_a_token_the_loopback_app_is_open():
    with TestClient(app_with(RecordingAPI(), None)) as client:
        assert client.get("/v1/envs").status_code == 200
        assert client.get("/metrics").status_code == 200


def test_the_client_sends_the_token():
    api = RecordingAPI()
    app = app_with(api, TOKEN)

    async def go(token):
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with EnvGatewayClient("http://gateway", token=token, transport=transport) as env:
                return await env.create_episode(EpisodeCreate(**BODY))

    assert asyncio.run(go(TOKEN)).episode_id == "e1"
    with pytest.raises(Exception, match="bearer token"):
        asyncio.run(go("wrong"))
    assert len(api.created) == 1


def test_bodies_are_json_only_a_pickle_is_rejected_unread():
    api = RecordingAPI()
    payload = pickle.dumps(EpisodeCreate(**BODY))
    with TestClient(app_with(api, None)) as client:
        response = client.post(
            "/v1/episodes", content=payload, headers={"Content-Type": "application/octet-stream"}
        )
    assert response.status_code == 422
    assert api.created == []


def test_standalone_server_refuses_a_public_bind_without_a_token(monkeypatch):
    started = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: started.append(k))
    with pytest.raises(ConfigError, match=r"env gateway on 0\.0\.0\.0 without a service token"):
        gateway_main.serve(EnvGatewaySettings(host="0.0.0.0"))
    gateway_main.serve(EnvGatewaySettings(host="0.0.0.0"), token=TOKEN)
    gateway_main.serve(EnvGatewaySettings())  # loopback: no token needed
    assert [(k["host"], k["port"]) for k in started] == [("0.0.0.0", 8100), ("127.0.0.1", 8100)]
