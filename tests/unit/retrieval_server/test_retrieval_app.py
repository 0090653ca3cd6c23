"""The retrieval server's routes in-process (FastAPI's test client): Search-R1 shapes and the drills."""

import pytest
from fastapi.testclient import TestClient

from services.envs.search.bm25_index import Bm25Retriever
from services.retrieval_server.app import create_app
from services.settings.retrieval_server import RetrievalServerSettings

DOCS = [
    ("city-1", '"Kessrow"\nKessrow is a city in Vel.'),
    ("country-1", '"Vel"\nVel is a country. The capital of Vel is Kessrow.'),
    ("person-1", '"Ada Lorn"\nAda Lorn was born in Kessrow.'),
]


@pytest.fixture(scope="module")
def index() -> Bm25Retriever:
    return Bm25Retriever(DOCS)


def test_retrieve_answers_in_search_r1_format(index: Bm25Retriever):
    client = TestClient(create_app(index, RetrievalServerSettings(default_topk=2), "test"))
    scored = client.post("/retrieve", json={"queries": ["Vel", "Ada Lorn"], "topk": 1, "return_scores": True})
    assert scored.status_code == 200
    result = scored.json()["result"]
    assert [row[0]["document"] for row in result] == [
        {"id": "country-1", "contents": DOCS[1][1]},
        {"id": "person-1", "contents": DOCS[2][1]},
    ]
    assert all(row[0]["score"] > 0 for row in result)
    plain = client.post("/retrieve", json={"queries": ["Kessrow"]}).json()["result"]
    assert len(plain[0]) == 2 and plain[0][0] == {"id": "city-1", "contents": DOCS[0][1]}
    assert client.get("/healthz").json() == {"status": "ok", "documents": 3, "corpus": "test"}


def test_limits_and_failure_drills(index: Bm25Retriever):
    client = TestClient(create_app(index, RetrievalServerSettings(max_queries=2, fail_every=2), "test"))
    assert client.post("/retrieve", json={"queries": ["a", "b", "c"]}).status_code == 413
    assert client.post("/retrieve", json={"queries": []}).status_code == 422
    codes = [client.post("/retrieve", json={"queries": ["Vel"]}).status_code for _ in range(4)]
    assert codes == [503, 200, 503, 200]  # requests 2..5: every 2nd fails


def test_the_refusals_are_documented_with_their_bodies(index: Bm25Retriever):
    app = create_app(index, RetrievalServerSettings(max_queries=1, fail_every=1), "test")
    documented = app.openapi()["paths"]["/retrieve"]["post"]["responses"]
    assert sorted(documented) == ["200", "400", "401", "413", "422", "503"]
    client = TestClient(app)
    too_many = client.post("/retrieve", json={"queries": ["a", "b"]})
    drill = client.post("/retrieve", json={"queries": ["Vel"]})
    assert (too_many.status_code, too_many.json()) == (
        413,
        {"detail": "2 queries in one /retrieve request; at most 1 ([retrieval_server] max_queries)"},
    )
    assert (drill.status_code, drill.json()) == (503, {"detail": "failure drill: request 2 fails (every 1)"})
    for status in ("413", "503"):
        schema = documented[status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorDetail"}
