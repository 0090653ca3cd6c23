"""Every HTTP app refuses a body above its limit with 413 before reading it (a Content-Length above
the limit unread, a streamed body as soon as its chunks pass it), names the limit and its setting,
lists its caps in /openapi.json, and puts its OpenAPI documents behind the token when one is set."""

import asyncio
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from services.env_gateway.app import create_app as gateway_app
from services.envs.search.bm25_index import Bm25Retriever
from services.envs.webshop.catalogue import generate_catalogue
from services.envs.webshop.goals import GoalBook, GoalSplits
from services.envs.webshop.server import create_app as webshop_app
from services.envs.webshop.server_envs import ShopEnvs
from services.envs.webshop.shop import Shop
from services.http_limits import BodyLimitMiddleware, Cap, body_cap
from services.retrieval_server.app import create_app as retrieval_app
from services.settings.env_gateway import EnvGatewaySettings
from services.settings.retrieval_server import RetrievalServerSettings
from services.teacher_scorer.routes import build_http_app as teacher_app

MB = 1 << 20
TOKEN = "lim-s3cret"
DOCUMENTS = [("city-1", '"Kessrow"\nKessrow is a city in Vel.'), ("country-1", '"Vel"\nVel is a country.')]


class NoEpisodes:
    """An episode runtime that must never be reached."""

    async def create(self, request: object) -> None:
        raise AssertionError("a refused request reached the episode runtime")


@asynccontextmanager
async def _no_episodes() -> AsyncIterator[NoEpisodes]:
    yield NoEpisodes()


def _shop() -> Shop:
    catalogue = generate_catalogue(0, 30)
    return Shop(catalogue, GoalBook(catalogue, GoalSplits(2, 4)), results_per_page=10, max_results=50)


def _teacher_backend() -> None:
    raise AssertionError("a refused request reached the teacher's backend")


# app name -> (builder taking a token, a JSON route, the body-limit setting, its default)
APPS: dict[str, tuple[Callable[[str | None], FastAPI], str, str, int]] = {
    "env-gateway": (
        lambda token: gateway_app(EnvGatewaySettings(), episode_api=_no_episodes, token=token),
        "/v1/episodes",
        "[env_gateway] max_body_bytes",
        MB,
    ),
    "teacher": (
        lambda token: teacher_app(_teacher_backend, lambda: token),  # type: ignore[arg-type,return-value]
        "/v1/score",
        "[teacher] http_max_body_bytes",
        32 * MB,
    ),
    "retrieval": (
        lambda token: retrieval_app(Bm25Retriever(DOCUMENTS), RetrievalServerSettings(), "t", token),
        "/retrieve",
        "[retrieval_server] max_body_bytes",
        MB,
    ),
    "webshop": (
        lambda token: webshop_app(ShopEnvs(_shop(), 4, random.Random(0)), token=token),
        "/step",
        "[env_gateway.webshop] server_max_body_bytes",
        65_536,
    ),
}


@pytest.mark.parametrize("name", list(APPS))
def test_a_64_mb_body_is_refused_with_413_naming_the_limit(name):
    build, path, setting, limit = APPS[name]
    body = b'{"sequences": [' + b" " * (64 * MB) + b"]}"
    with TestClient(build(None)) as client:
        response = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json() == {
        "detail": f"a request body of {len(body)} bytes exceeds the limit of {limit} bytes ({setting})"
    }


@pytest.mark.parametrize("name", list(APPS))
def test_a_streamed_body_is_counted_and_refused_once_past_the_limit(name):
    """No Content-Length (chunked): the app stops reading at the first chunk past its limit."""
    build, path, setting, limit = APPS[name]
    app = build(None)
    pulled = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal pulled
        for _ in range(limit // (MB // 4) + 8):
            pulled += 1
            yield b" " * (MB // 4)

    async def post() -> httpx.Response:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
                return await client.post(path, content=chunks(), headers={"Content-Type": "application/json"})

    response = asyncio.run(post())
    assert response.status_code == 413
    read = pulled * (MB // 4)
    assert response.json() == {
        "detail": f"a request body of at least {read} bytes exceeds the limit of {limit} bytes ({setting})"
    }
    assert read - MB // 4 <= limit < read  # the chunk that passed the limit was the last one read


def test_a_content_length_above_the_limit_is_answered_without_reading_the_body():
    async def app(scope, receive, send):
        raise AssertionError("the app ran")

    async def receive():
        raise AssertionError("the body was read")

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/x",
        "headers": [(b"content-length", str(64 * MB).encode())],
    }
    middleware = BodyLimitMiddleware(app, body_cap(1024, "[x] max_body_bytes"))
    asyncio.run(middleware(scope, receive, send))
    assert sent[0]["status"] == 413
    assert sent[1]["body"] == (
        b'{"detail":"a request body of 67108864 bytes exceeds the limit of 1024 bytes ([x] max_body_bytes)"}'
    )


def test_bodies_within_the_limit_reach_the_app_unchanged():
    with TestClient(APPS["retrieval"][0](None)) as client:
        response = client.post("/retrieve", json={"queries": ["Vel"], "topk": 1})
    assert response.status_code == 200 and len(response.json()["result"][0]) == 1


def test_a_cap_names_the_count_the_cap_and_its_setting():
    cap = Cap("queries in one request", 3, "[s] max_queries")
    cap.check(3)
    with pytest.raises(ValueError, match=r"^4 queries in one request; at most 3 \(\[s\] max_queries\)$"):
        cap.check(4)


@pytest.mark.parametrize("name", list(APPS))
def test_openapi_lists_the_body_limit_and_the_documents_follow_the_token(name):
    build, _, setting, limit = APPS[name]
    with TestClient(build(None)) as client:
        description = client.get("/openapi.json").json()["info"]["description"]
        assert f"| bytes of request body | {limit} | `{setting}` | 413 |" in description
        assert client.get("/docs").status_code == 200
    with TestClient(build(TOKEN)) as client:
        for path in ("/openapi.json", "/docs", "/redoc"):
            refused = client.get(path)
            assert (refused.status_code, refused.json()) == (401, {"detail": "missing or wrong bearer token"})
            assert client.get(path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
