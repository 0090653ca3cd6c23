"""What one HTTP request may ask of the teacher: sequences, top_k and scored positions x top_k are
capped (``[teacher] http_max_*``) and refused before any scoring; /healthz runs no model, /readyz
does, behind the token. The backend here is a flat teacher that answers any request, so a refusal
can only come from the caps."""

import numpy as np
import pytest
from fastapi.testclient import TestClient

from services.contracts.teacher import ScoreRequest, ScoreResponse, TeacherContext
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.codec import requested_top_k, response_from_scores, rows_from_request
from services.teacher_scorer.engine import RowScores, ScoreRow
from services.teacher_scorer.routes import TeacherHttpCaps, build_http_app

TOKEN = "caps-s3cret"


class FlatTeacher:
    """Answers every request (uniform log-probs over a vocabulary of 200k), counting what reached it."""

    served_model = "flat"
    codec_kernels = None
    default_top_k = 50

    def __init__(self) -> None:
        self.scored_rows = 0
        self.health_checks = 0

    async def score(self, request: ScoreRequest) -> ScoreResponse:
        rows = rows_from_request(request)
        return response_from_scores(rows, await self.score_rows(rows, requested_top_k(request) or 50))

    async def score_rows(self, rows: list[ScoreRow], top_k: int) -> list[RowScores]:
        self.scored_rows += len(rows)
        out = []
        for row in rows:
            p = len(row.positions_P)
            ids = np.tile(np.arange(top_k, dtype=np.int32), (p, 1))
            flat = np.full((p, top_k), -np.log(200_000), dtype=np.float32)
            out.append(RowScores(ids, flat, flat[:, 0].copy(), np.full(p, np.log(200_000), np.float32)))
        return out

    def limits(self) -> TeacherContext:
        return TeacherContext(max_context=1 << 20, token_budget=1 << 20)

    async def check_health(self) -> None:
        self.health_checks += 1

    def metrics_exposition(self) -> bytes:
        return b""

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [ord(c) for c in text]


def client_for(teacher: FlatTeacher, token: str | None = None, **caps: int) -> TestClient:
    settings = TeacherSettings.model_validate(caps)
    return TestClient(build_http_app(lambda: teacher, lambda: token, TeacherHttpCaps.of(settings)))


def test_prompt_logprobs_above_the_cap_is_refused_before_scoring():
    teacher = FlatTeacher()
    with client_for(teacher) as client:
        refused = client.post("/v1/completions", json={"prompt": [1, 2], "prompt_logprobs": 8192})
        within = client.post("/v1/completions", json={"prompt": [1, 2], "prompt_logprobs": 512})
    assert (refused.status_code, refused.json()) == (
        422,
        {"detail": "top_k must be in [1, 512] ([teacher] http_max_top_k), got 8192"},
    )
    assert within.status_code == 200
    assert len(within.json()["choices"][0]["prompt_logprobs"][1]) == 512
    assert teacher.scored_rows == 1  # only the request within the cap


def test_score_top_k_above_the_cap_is_refused():
    teacher = FlatTeacher()
    body = {"sequences": [{"token_ids": [1, 2], "positions": [1]}], "top_k": 1000}
    with client_for(teacher) as client:
        response = client.post("/v1/score", json=body)
    assert (response.status_code, response.json()["detail"]) == (
        422,
        "top_k must be in [1, 512] ([teacher] http_max_top_k), got 1000",
    )
    assert teacher.scored_rows == 0


def test_more_sequences_than_the_cap_are_413():
    teacher = FlatTeacher()
    sequences = [{"token_ids": [1, 2], "positions": [1]}] * 4097
    with client_for(teacher) as client:
        score = client.post("/v1/score", json={"sequences": sequences, "top_k": 1})
        prompts = client.post("/v1/completions", json={"prompt": [[1, 2]] * 4097, "prompt_logprobs": 1})
    detail = "4097 sequences (prompts) in one request; at most 4096 ([teacher] http_max_sequences)"
    assert (score.status_code, score.json()) == (413, {"detail": detail})
    assert (prompts.status_code, prompts.json()) == (413, {"detail": detail})
    assert teacher.scored_rows == 0


def test_repeated_positions_cannot_ask_for_an_unbounded_answer():
    """A 2-token sequence scoring its one position 40,000 times at K = 512: 20.5M entries."""
    teacher = FlatTeacher()
    body = {"sequences": [{"token_ids": [1, 2], "positions": [1] * 40_000}], "top_k": 512}
    with client_for(teacher) as client:
        response = client.post("/v1/score", json=body)
    assert (response.status_code, response.json()["detail"]) == (
        413,
        "20480000 top-K entries (scored positions x top_k) in one request; at most 16777216 "
        "([teacher] http_max_entries)",
    )
    assert teacher.scored_rows == 0


def test_the_caps_are_settings_and_an_unset_top_k_counts_as_the_default():
    teacher = FlatTeacher()
    seq = {"token_ids": [1, 2, 3], "positions": [1, 2]}
    with client_for(teacher, http_max_entries=100, http_max_sequences=2) as client:
        ok = client.post("/v1/score", json={"sequences": [seq]})  # 2 positions x default 50 = 100
        default_k = client.post(
            "/v1/score", json={"sequences": [seq, {"token_ids": [1, 2], "positions": [1]}]}
        )
        at_cap = client.post("/v1/completions", json={"prompt": [1] * 26, "prompt_logprobs": 4})
        past = client.post("/v1/completions", json={"prompt": [1] * 27, "prompt_logprobs": 4})
        three = client.post("/v1/completions", json={"prompt": [[1, 2]] * 3, "prompt_logprobs": 1})
    assert (ok.status_code, at_cap.status_code) == (200, 200)
    assert default_k.status_code == 413 and default_k.json()["detail"].startswith("150 top-K entries")
    assert (past.status_code, past.json()["detail"]) == (
        413,
        "104 top-K entries (scored positions x top_k) in one request; at most 100 ([teacher] http_max_entries)",
    )
    assert three.status_code == 413 and "at most 2 ([teacher] http_max_sequences)" in three.json()["detail"]


def test_openapi_lists_every_cap_with_its_setting():
    with client_for(FlatTeacher(), http_max_sequences=8) as client:
        description = client.get("/openapi.json").json()["info"]["description"]
    assert description.splitlines()[-4:] == [
        "| bytes of request body | 33554432 | `[teacher] http_max_body_bytes` | 413 |",
        "| sequences (prompts) in one request | 8 | `[teacher] http_max_sequences` | 413 |",
        "| top_k (prompt_logprobs) | 512 | `[teacher] http_max_top_k` | 422 |",
        "| top-K entries (scored positions x top_k) in one request | 16777216 | `[teacher] http_max_entries` | 413 |",
    ]


def test_healthz_runs_no_model_and_readyz_runs_it_behind_the_token():
    teacher = FlatTeacher()
    with client_for(teacher, token=TOKEN) as client:
        assert [client.get("/healthz").json() for _ in range(3)] == [{"status": "ok"}] * 3
        assert teacher.health_checks == 0
        assert client.get("/readyz").status_code == 401
        ready = client.get("/readyz", headers={"Authorization": f"Bearer {TOKEN}"})
    assert (ready.status_code, ready.json(), teacher.health_checks) == (200, {"status": "ok"}, 1)


@pytest.mark.parametrize(
    "field", ["http_max_sequences", "http_max_entries", "http_max_top_k", "http_max_body_bytes"]
)
def test_each_cap_refuses_zero(field):
    with pytest.raises(ValueError, match=field):
        TeacherSettings.model_validate({field: 0})
