"""EnvGatewayClient glue: HTTP answers become typed results or TurnOPD errors; only connection
failures are retried. A stub transport stands in for the server (the real one is exercised by
the integration tests)."""

import asyncio

import httpx
import pytest

from services.contracts.env_gateway import EpisodeCreate
from services.env_gateway.client import EnvGatewayClient
from services.env_gateway.episode_errors import (
    ActionRejectedError,
    EngineError,
    EpisodeLostError,
    GatewayBusyError,
)
from services.errors import ConflictError, InputError, NotFoundError

STEP = {
    "observation": "You arrive at fridge 1.",
    "reward": 0.0,
    "done": False,
    "won": False,
    "admissible_actions": ["open fridge 1"],
    "turn": 1,
    "expert_action": None,
}


def client_for(handler) -> EnvGatewayClient:
    return EnvGatewayClient(
        "http://gateway/prefix", transport=httpx.MockTransport(handler), retry_backoff_s=0
    )


def run(coro):
    return asyncio.run(coro)


def test_step_posts_to_the_prefixed_path_and_parses_the_result():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, request.content))
        return httpx.Response(200, json=STEP)

    async def go():
        async with client_for(handler) as client:
            return await client.step("ep1", "go to fridge 1")

    result = run(go())
    assert result.turn == 1 and result.admissible_actions == ["open fridge 1"]
    assert seen == [("POST", "/prefix/v1/episodes/ep1/step", b'{"action":"go to fridge 1"}')]


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (404, {"detail": "no episode"}, NotFoundError),
        (409, {"detail": "finished"}, ConflictError),
        (410, {"detail": "worker died"}, EpisodeLostError),
        (422, {"detail": [{"loc": ["body", "action"], "msg": "Field required"}]}, InputError),
        (503, {"detail": "busy"}, GatewayBusyError),
        (500, {"detail": "engine"}, EngineError),
    ],
)
def test_http_errors_become_turnopd_errors(status, body, error):
    async def go():
        async with client_for(lambda request: httpx.Response(status, json=body)) as client:
            await client.step("ep1", "look")

    with pytest.raises(error):
        run(go())


def test_rejected_action_carries_problems_and_admissible_actions():
    body = {"detail": "not admissible", "problems": ["unknown verb 'fly'"], "admissible_actions": ["look"]}

    async def go():
        async with client_for(lambda request: httpx.Response(422, json=body)) as client:
            await client.step("ep1", "fly")

    with pytest.raises(ActionRejectedError) as info:
        run(go())
    assert info.value.problems == ["unknown verb 'fly'"] and info.value.admissible_actions == ["look"]


def test_connection_errors_are_retried_then_succeed():
    attempts = []

    def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        if len(attempts) < 3:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json=STEP)

    async def go():
        async with client_for(handler) as client:
            return await client.step("ep1", "look")

    assert run(go()).turn == 1 and len(attempts) == 3


def test_read_errors_are_not_retried():
    attempts = []

    def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        raise httpx.ReadError("reset", request=request)

    async def go():
        async with client_for(handler) as client:
            await client.create_episode(EpisodeCreate(env="alfworld", split="train"))

    with pytest.raises(httpx.ReadError):
        run(go())
    assert len(attempts) == 1


def test_retries_give_up_after_the_budget():
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async def go():
        client = EnvGatewayClient(
            "http://gateway", transport=httpx.MockTransport(handler), connect_retries=2, retry_backoff_s=0
        )
        async with client:
            await client.envs()

    with pytest.raises(httpx.ConnectError):
        run(go())
