"""The HTTP routes over an in-process backend (the real scorer, without Serve's batching)."""

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from in_process_teacher import InProcessBackend

from services.contracts.teacher import ScoreResponse
from services.teacher_scorer.engine import RowScores
from services.teacher_scorer.routes import build_http_app
from services.teacher_scorer.scorer import TeacherScorer
from services.teacher_scorer.transformers_engine import TransformersEngine, load_teacher_model


@pytest.fixture
def client(engine):
    backend = InProcessBackend(TeacherScorer(engine, token_budget=256, max_batch_size=8), default_top_k=6)
    with TestClient(build_http_app(lambda: backend)) as c:
        yield c


def test_score_equals_direct_forward(client, make_rows, check_scores):
    rows = make_rows(seed=31, lengths=[9, 25, 4])
    body = {
        "sequences": [
            {"token_ids": r.token_ids_T.tolist(), "positions": r.positions_P.tolist()} for r in rows
        ],
        "top_k": 4,
    }
    response = client.post("/v1/score", json=body)
    assert response.status_code == 200
    result = ScoreResponse.model_validate_json(response.content)
    for row, seq in zip(rows, result.results, strict=True):
        assert seq.positions == row.positions_P.tolist()
        check_scores(row, _as_scores(seq), 4)


def test_omitted_top_k_is_the_configured_distill_topk(client):
    response = client.post("/v1/score", json={"sequences": [{"token_ids": [1, 2, 3], "positions": [1, 2]}]})
    assert response.status_code == 200
    assert [len(ids) for ids in response.json()["results"][0]["top_ids"]] == [6, 6]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"sequences": [{"token_ids": [1, 999], "positions": [1]}], "top_k": 3}, "token id 999 at index 1"),
        ({"sequences": [{"token_ids": [1, 2], "positions": [1]}], "top_k": 600}, "top_k must be in [1, 512]"),
        ({"sequences": [{"token_ids": list(range(257)), "positions": [1]}], "top_k": 3}, "257 tokens exceed"),
        (
            {"sequences": [{"token_ids": [1, 2], "positions": [2]}], "top_k": 3},
            "positions [2] outside [1, 2)",
        ),
        ({"sequences": [{"token_ids": [1, 2], "positions": [1]}], "top_k": 0}, "top_k"),
        ({"sequences": [{"token_ids": [1, 2], "positions": [1]}], "top_k": 3, "x": 1}, "x"),
    ],
)
def test_bad_input_is_422_naming_the_problem_and_the_app_keeps_serving(client, body, fragment):
    response = client.post("/v1/score", json=body)
    assert response.status_code == 422
    assert fragment in str(response.json()["detail"])
    ok = client.post("/v1/score", json={"sequences": [{"token_ids": [1, 2], "positions": [1]}], "top_k": 2})
    assert ok.status_code == 200


def test_with_a_token_score_and_metrics_need_the_bearer(engine):
    backend = InProcessBackend(TeacherScorer(engine, token_budget=256, max_batch_size=8), default_top_k=6)
    body = {"sequences": [{"token_ids": [1, 2, 3], "positions": [2]}], "top_k": 2}
    with TestClient(build_http_app(lambda: backend, lambda: "t-s3cret")) as c:
        assert c.get("/healthz").status_code == 200  # liveness stays open
        paths = [("POST", "/v1/score"), ("GET", "/metrics"), ("GET", "/v1/models"), ("GET", "/readyz")]
        for method, path in [*paths, ("GET", "/openapi.json"), ("GET", "/docs")]:
            assert c.request(method, path, json=body).status_code == 401
            assert (
                c.request(method, path, json=body, headers={"Authorization": "Bearer x"}).status_code == 401
            )
        assert backend.metrics.stats().requests == 0  # refused before the backend
        auth = {"Authorization": "Bearer t-s3cret"}
        assert c.post("/v1/score", json=body, headers=auth).status_code == 200
        assert (
            'turnopd_teacher_requests_total{outcome="ok",replica="in-process"} 1.0'
            in c.get("/metrics", headers=auth).text
        )


def test_models_names_the_served_model_and_its_context_as_vllm_counts_it(client):
    answer = client.get("/v1/models")
    assert answer.status_code == 200
    assert answer.json() == {
        "object": "list",
        "data": [
            {"id": "teacher", "object": "model", "created": 0, "owned_by": "turnopd", "max_model_len": 257}
        ],
    }  # the token budget of 256 bounds what it scores; vLLM counts one token more


def test_a_pickled_body_is_refused_unread(client):
    import pickle

    payload = pickle.dumps({"sequences": [{"token_ids": [1, 2], "positions": [1]}]})
    response = client.post("/v1/score", content=payload, headers={"Content-Type": "application/octet-stream"})
    assert response.status_code == 422


def test_health_and_metrics(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    client.post("/v1/score", json={"sequences": [{"token_ids": [1, 2, 3], "positions": [2]}], "top_k": 2})
    text = client.get("/metrics").text
    assert 'turnopd_teacher_requests_total{outcome="ok",replica="in-process"} 1.0' in text
    assert 'turnopd_teacher_scored_positions_total{replica="in-process"} 1.0' in text
    assert 'turnopd_teacher_engine_healthy{replica="in-process"} 1.0' in text


def test_a_broken_engine_answers_503(teacher_path):
    model = load_teacher_model(teacher_path, "cpu", "float32")
    backend = InProcessBackend(TeacherScorer(TransformersEngine(model), token_budget=64, max_batch_size=4), 3)
    with torch.no_grad():
        model.get_output_embeddings().weight.fill_(float("nan"))
    with TestClient(build_http_app(lambda: backend)) as c:
        response = c.post("/v1/score", json={"sequences": [{"token_ids": [1, 2], "positions": [1]}]})
        assert response.status_code == 503
        assert "replica is being replaced" in response.json()["detail"]
        assert c.get("/healthz").status_code == 200  # liveness: the app answers, no model touched
        ready = c.get("/readyz")
        assert ready.status_code == 503 and "replica is being replaced" in ready.json()["detail"]


def _as_scores(seq):
    return RowScores(
        np.asarray(seq.top_ids),
        np.asarray(seq.top_logprobs, dtype=np.float32),
        np.asarray(seq.token_logprob, dtype=np.float32),
        np.asarray(seq.entropy, dtype=np.float32),
    )
