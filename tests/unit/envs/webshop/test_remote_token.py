"""The remote webshop client sends the run's service token: the real webshop server app plays a
session with it, and a missing or wrong token is a RemoteShopError that says which."""

import random

import httpx
import pytest
from in_process_app import app_transport

from services.envs.webshop.catalogue import generate_catalogue
from services.envs.webshop.goals import GoalBook, GoalSplits
from services.envs.webshop.remote import AgentGymWebShopClient, RemoteShopError, RemoteShopSession
from services.envs.webshop.server import create_app
from services.envs.webshop.server_envs import ShopEnvs
from services.envs.webshop.shop import Shop

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def server() -> httpx.MockTransport:
    """The webshop server's app with a token, reached in-process through the client's httpx stack."""
    catalogue = generate_catalogue(0, 60)
    shop = Shop(catalogue, GoalBook(catalogue, GoalSplits(5, 10)), results_per_page=10, max_results=50)
    return app_transport(create_app(ShopEnvs(shop, max_envs=4, rng=random.Random(0)), token=TOKEN))


def client(server: httpx.MockTransport, token: str | None) -> AgentGymWebShopClient:
    return AgentGymWebShopClient("http://shop.test/", 2.0, service_token=token, transport=server)


def test_with_the_token_a_session_plays(server: httpx.MockTransport):
    session = RemoteShopSession(client(server, TOKEN), goal_id=3, gid="valid_unseen/goal_00003", expert=False)
    try:
        opening = session.start()
    finally:
        session.close()
    assert opening.observation.startswith("WebShop [SEP] Instruction:")
    assert opening.admissible_actions and opening.game_id == "valid_unseen/goal_00003"


def test_without_the_token_the_error_says_the_run_has_none(server: httpx.MockTransport):
    with pytest.raises(RemoteShopError) as refused:
        client(server, None).create()
    assert str(refused.value) == (
        "the webshop server at http://shop.test demands a service token that this run does not have "
        "(401): set the same [security] service_token / TURNOPD_SERVICE_TOKEN for the run and the "
        "server (POST /create)"
    )


def test_a_wrong_token_is_refused_by_name(server: httpx.MockTransport):
    with pytest.raises(RemoteShopError, match=r"refused the service token \(401\): set the same"):
        client(server, "not-it").observation(0)


def test_the_header_is_sent_only_with_a_token():
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Authorization"))
        return httpx.Response(200, json=1)

    for token in (TOKEN, None):
        AgentGymWebShopClient("http://shop.test", 1.0, token, httpx.MockTransport(handler)).create()
    assert seen == [f"Bearer {TOKEN}", None]
