"""``POST /v1/completions`` over an in-process backend: the same scores as ``/v1/score``, in the
OpenAI-compatible shape."""

import numpy as np
import pytest
from fastapi.testclient import TestClient
from in_process_teacher import InProcessBackend

from services.contracts.completions import CompletionResponse
from services.contracts.teacher import ScoreResponse
from services.teacher_scorer.completions_codec import scores_from_completion
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.routes import build_http_app
from services.teacher_scorer.scorer import TeacherScorer


@pytest.fixture
def client(engine):
    backend = InProcessBackend(TeacherScorer(engine, token_budget=256, max_batch_size=8), default_top_k=6)
    with TestClient(build_http_app(lambda: backend)) as c:
        yield c


def _every_position(rows):
    # The endpoint scores every position; the same rows on /v1/score score them all too (the head's
    # matmul over another set of positions differs in float32 rounding, ~1e-5).
    return [ScoreRow(r.token_ids_T, np.arange(1, r.length)) for r in rows]


def test_completions_give_the_scores_of_v1_score(client, make_rows):
    rows = _every_position(make_rows(seed=37, lengths=[9, 25, 4]))
    k = 5
    answer = client.post(
        "/v1/completions",
        json={
            "model": "teacher",
            "prompt": [r.token_ids_T.tolist() for r in rows],
            "prompt_logprobs": k,
            "max_tokens": 1,
        },
    )
    assert answer.status_code == 200, answer.text
    response = CompletionResponse.model_validate_json(answer.content)
    assert response.model == "teacher"
    assert [c.prompt_token_ids for c in response.choices] == [r.token_ids_T.tolist() for r in rows]
    assert [c.prompt_logprobs[0] for c in response.choices if c.prompt_logprobs] == [None] * 3
    reference = ScoreResponse.model_validate_json(
        client.post(
            "/v1/score",
            json={
                "sequences": [
                    {"token_ids": r.token_ids_T.tolist(), "positions": r.positions_P.tolist()} for r in rows
                ],
                "top_k": k,
            },
        ).content
    )
    for row, ours, seq in zip(
        rows, scores_from_completion(answer.content, rows, k), reference.results, strict=True
    ):
        assert ours.top_ids_P_K.tolist() == seq.top_ids
        assert np.abs(ours.top_logprobs_P_K - np.asarray(seq.top_logprobs, dtype=np.float32)).max() <= 1e-6
        np.testing.assert_array_equal(ours.token_logprob_P, np.asarray(seq.token_logprob, dtype=np.float32))
        assert row.length == len(ours.token_logprob_P) + 1 or len(ours.token_logprob_P) == len(
            row.positions_P
        )


def test_one_prompt_gets_one_choice_with_an_entry_per_position(client):
    answer = client.post("/v1/completions", json={"prompt": [1, 2, 3], "prompt_logprobs": 2})
    assert answer.status_code == 200, answer.text
    (choice,) = answer.json()["choices"]
    assert choice["index"] == 0 and choice["text"] == ""
    assert choice["prompt_logprobs"][0] is None
    for position, token in zip(choice["prompt_logprobs"][1:], [2, 3], strict=True):
        assert str(token) in position
        ranked = sorted(e["rank"] for e in position.values() if e["rank"] is not None)
        assert ranked == [1, 2]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"prompt": [1, 999], "prompt_logprobs": 3}, "token id 999 at index 1"),
        ({"prompt": [1, 2], "prompt_logprobs": 600}, "top_k must be in [1, 512]"),
        ({"prompt": [1, 2], "prompt_logprobs": 3, "max_tokens": 16}, "max_tokens"),
        ({"prompt": "text", "prompt_logprobs": 3}, "prompt"),
    ],
)
def test_bad_input_is_422_naming_the_problem(client, body, fragment):
    response = client.post("/v1/completions", json=body)
    assert response.status_code == 422
    assert fragment in response.text


def test_openapi_documents_completions(client):
    paths = client.get("/openapi.json").json()["paths"]
    responses = paths["/v1/completions"]["post"]["responses"]
    assert sorted(responses) == ["200", "400", "401", "422", "503"]
    assert responses["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/CompletionResponse"
    }
