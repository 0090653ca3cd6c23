"""The webshop server's routes in-process: unknown envs answer the documented 404, out-of-range goals
the documented 422, too long an action 413, and /reset's [observation, null] matches its documented
two-item array; the shop works off the event loop, and a token closes every route but `/`."""

import asyncio
import random

from fastapi.testclient import TestClient

from services.envs.webshop.catalogue import generate_catalogue
from services.envs.webshop.goals import GoalBook, GoalSplits
from services.envs.webshop.server import create_app
from services.envs.webshop.server_envs import ShopEnvs
from services.envs.webshop.shop import Shop


def app():
    catalogue = generate_catalogue(0, 60)
    shop = Shop(catalogue, GoalBook(catalogue, GoalSplits(5, 10)), results_per_page=10, max_results=50)
    return create_app(ShopEnvs(shop, max_envs=1, rng=random.Random(0)))


def test_errors_answer_as_documented():
    shop = app()
    paths = shop.openapi()["paths"]
    assert sorted(paths["/observation"]["get"]["responses"]) == ["200", "401", "404", "422"]
    assert sorted(paths["/reset"]["post"]["responses"]) == ["200", "400", "401", "404", "413", "422"]
    assert sorted(paths["/step"]["post"]["responses"]) == ["200", "400", "401", "404", "413", "422"]
    assert sorted(paths["/create"]["post"]["responses"]) == ["200", "401", "503"]
    assert sorted(paths["/"]["get"]["responses"]) == ["200"]
    reset = paths["/reset"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert (reset["minItems"], reset["maxItems"], reset["items"]) == (
        2,
        2,
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
    )
    client = TestClient(shop)
    assert client.get("/observation", params={"env_idx": 7}).json() == {
        "detail": "no env 7 (never created, closed, or unused for over 900s)"
    }
    env = client.post("/create").json()
    full = client.post("/create")
    assert (full.status_code, full.json()) == (
        503,
        {"detail": "all 1 envs are open and used within 900s; close one first"},
    )
    far = client.post("/reset", json={"env_idx": env, "session_id": 99})
    assert (far.status_code, far.json()) == (
        422,
        {"detail": "goal id 99 is outside the shop's goals [0, 15)"},
    )
    observation, nothing = client.post("/reset", json={"env_idx": env, "session_id": 3}).json()
    assert observation.startswith("WebShop [SEP] Instruction:") and nothing is None


def test_an_action_above_its_cap_is_413_and_changes_nothing():
    client = TestClient(app())
    env = client.post("/create").json()
    before = client.get("/observation", params={"env_idx": env}).json()
    long = client.post("/step", json={"env_idx": env, "action": "search[" + "x" * 2000 + "]"})
    assert (long.status_code, long.json()) == (
        413,
        {
            "detail": "2008 characters of a /step action; at most 1024 "
            "([env_gateway.webshop] server_max_action_chars)"
        },
    )
    assert client.get("/observation", params={"env_idx": env}).json() == before
    assert client.post("/step", json={"env_idx": env, "action": "search[red shoes]"}).status_code == 200


def test_the_shop_works_off_the_event_loop():
    """Searches and pages run in a worker thread: the event loop keeps answering meanwhile."""
    seen: list[bool] = []

    class Recording(ShopEnvs):
        def create(self) -> int:
            try:
                asyncio.get_running_loop()
                seen.append(True)
            except RuntimeError:
                seen.append(False)
            return super().create()

    catalogue = generate_catalogue(0, 60)
    shop = Shop(catalogue, GoalBook(catalogue, GoalSplits(5, 10)), results_per_page=10, max_results=50)
    with TestClient(create_app(Recording(shop, max_envs=2, rng=random.Random(0)))) as client:
        assert client.post("/create").status_code == 200
    assert seen == [False]  # no running loop: a worker thread


def test_with_a_token_every_route_but_alive_needs_it():
    catalogue = generate_catalogue(0, 60)
    shop = Shop(catalogue, GoalBook(catalogue, GoalSplits(5, 10)), results_per_page=10, max_results=50)
    client = TestClient(create_app(ShopEnvs(shop, max_envs=2, rng=random.Random(0)), token="w-s3cret"))
    assert client.get("/").status_code == 200
    for method, path in [("POST", "/create"), ("GET", "/list_envs"), ("GET", "/observation?env_idx=0")]:
        assert client.request(method, path).status_code == 401, path
    auth = {"Authorization": "Bearer w-s3cret"}
    assert client.post("/create", headers=auth).json() == 0
    assert client.get("/list_envs", headers=auth).json() == [0]
