"""The webshop server's routes in-process: unknown envs answer the documented 404, out-of-range goals
the documented 422, and /reset's [observation, null] matches its documented two-item array."""

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
    assert sorted(paths["/observation"]["get"]["responses"]) == ["200", "404", "422"]
    assert sorted(paths["/reset"]["post"]["responses"]) == ["200", "400", "404", "422"]
    assert sorted(paths["/create"]["post"]["responses"]) == ["200", "503"]
    reset = paths["/reset"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert (reset["minItems"], reset["maxItems"], reset["items"]) == (
        2,
        2,
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
    )
    client = TestClient(shop)
    assert client.get("/observation", params={"env_idx": 7}).json() == {
        "detail": "no env 7 (never created, or closed)"
    }
    env = client.post("/create").json()
    full = client.post("/create")
    assert (full.status_code, full.json()) == (503, {"detail": "all 1 envs are open; close one first"})
    far = client.post("/reset", json={"env_idx": env, "session_id": 99})
    assert (far.status_code, far.json()) == (
        422,
        {"detail": "goal id 99 is outside the shop's goals [0, 15)"},
    )
    observation, nothing = client.post("/reset", json={"env_idx": env, "session_id": 3}).json()
    assert observation.startswith("WebShop [SEP] Instruction:") and nothing is None
