"""``POST /v1/completions`` over an in-process backend: the same scores as ``/v1/score``, in the
OpenAI-compatible shape."""

import json
import shutil

import numpy as np
import pytest
from fastapi.testclient import TestClient
from in_process_teacher import InProcessBackend

from services.contracts.completions import CompletionResponse
from services.contracts.teacher import ScoreResponse
from services.models.loading import load_tokenizer
from services.teacher_scorer.completions_codec import scores_from_completion
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.routes import build_http_app
from services.teacher_scorer.scorer import TeacherScorer
from services.teacher_scorer.transformers_engine import TransformersEngine, load_teacher_model


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
    assert sorted(responses) == ["200", "400", "401", "413", "422", "503"]
    assert responses["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/CompletionResponse"
    }


# --- the fields of vLLM's CompletionRequest beyond our subset ---

PROMPTS = [[5, 17, 300, 42, 9, 81, 7, 260, 33, 4, 150, 61], [2, 8, 99]]
SAMPLING = {
    "temperature": 0.0,
    "top_p": 0.9,
    "top_k": 3,
    "min_p": 0.05,
    "seed": 7,
    "stop": ["\n"],
    "stop_token_ids": [2],
    "frequency_penalty": 0.5,
    "presence_penalty": -0.5,
    "repetition_penalty": 1.2,
    "logit_bias": {"5": -100.0},
    "allowed_token_ids": [1, 2],
    "bad_words": ["x"],
    "ignore_eos": True,
    "min_tokens": 1,
    "user": "someone",
    "priority": 3,
    "cache_salt": "salt",
}
# The values vLLM's request defaults to, also for the fields served at their default only.
DEFAULTS = {
    "n": 1,
    "echo": False,
    "stream": False,
    "use_beam_search": False,
    "stop": [],
    "stop_token_ids": [],
    "bad_words": [],
    "length_penalty": 1.0,
    "skip_special_tokens": True,
    "spaces_between_special_tokens": True,
    "add_special_tokens": True,
    "routed_experts_prompt_start": 0,
    "return_token_offsets": False,
    "mm_payload": "tensors",
    "response_format": {"type": "text"},
    "kv_transfer_params": {},
    "vllm_xargs": {},
}


@pytest.fixture(params=[True, False], ids=["C codec", "Python codec"])
def codec_client(engine, request):
    """The app writing its answers with the compiled codec, or in Python."""
    scorer = TeacherScorer(engine, token_budget=256, max_batch_size=8)
    backend = InProcessBackend(scorer, default_top_k=6, native_codec=request.param)
    with TestClient(build_http_app(lambda: backend)) as c:
        yield c


def _choices(client, **fields):
    answer = client.post("/v1/completions", json={"prompt": PROMPTS, "prompt_logprobs": 4, **fields})
    assert answer.status_code == 200, answer.text
    return answer.json()["choices"]


@pytest.mark.parametrize("fields", [SAMPLING, DEFAULTS], ids=["sampling fields", "vLLM's defaults"])
def test_vllm_fields_that_cannot_change_prompt_logprobs_are_accepted_with_no_effect(codec_client, fields):
    plain = _choices(codec_client)
    assert _choices(codec_client, **fields) == plain
    assert [c["prompt_token_ids"] for c in plain] == PROMPTS
    assert len(plain[0]["prompt_logprobs"]) == len(PROMPTS[0])


def test_the_issue_request_with_temperature_zero_is_answered(client):
    body = {
        "model": "teacher",
        "prompt": [[1, 2, 3]],
        "prompt_logprobs": 2,
        "max_tokens": 1,
        "temperature": 0.0,
    }
    answer = client.post("/v1/completions", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["prompt_token_ids"] == [1, 2, 3]


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("stream", True, "true"),
        ("stream_options", {"include_usage": True}, '{"include_usage":true}'),
        ("n", 2, "2"),
        ("echo", True, "true"),
        ("logprobs", 1, "1"),
        ("logprobs", 0, "0"),
        ("logprob_token_ids", [3], "[3]"),
        ("suffix", "}", '"}"'),
        ("use_beam_search", True, "true"),
        ("prompt_embeds", "AAAA", '"AAAA"'),
        ("response_format", {"type": "json_object"}, '{"type":"json_object"}'),
        ("structured_outputs", {"regex": "a+"}, '{"regex":"a+"}'),
        ("kv_transfer_params", {"do_remote_decode": True}, '{"do_remote_decode":true}'),
        ("ec_transfer_params", {"x": 1}, '{"x":1}'),
        ("vllm_xargs", {"my_arg": 1}, '{"my_arg":1}'),
    ],
)
def test_a_value_this_app_cannot_honour_is_422_naming_the_field_and_value(client, field, value, shown):
    response = client.post("/v1/completions", json={"prompt": [1, 2, 3], "prompt_logprobs": 2, field: value})
    assert response.status_code == 422
    (problem,) = response.json()["detail"]
    assert problem["loc"] == ["body", field]
    assert problem["msg"].startswith(f"Value error, {field} = {shown} cannot be honoured: ")


def test_a_name_vllm_does_not_have_is_still_422_naming_it(client):
    body = {"prompt": [1, 2, 3], "prompt_logprobs": 2, "temprature": 0.0}
    response = client.post("/v1/completions", json=body)
    assert response.status_code == 422
    (problem,) = response.json()["detail"]
    assert (problem["loc"], problem["msg"]) == (["body", "temprature"], "Extra inputs are not permitted")


@pytest.mark.parametrize(
    ("side", "kept"), [(None, PROMPTS[0][-5:]), ("left", PROMPTS[0][-5:]), ("right", PROMPTS[0][:5])]
)
def test_truncate_prompt_tokens_scores_the_tokens_vllm_keeps(codec_client, side, kept):
    """vLLM keeps the last N tokens (its tokenizers truncate on the left for generating models), the
    first N with truncation_side 'right'; a prompt no longer than N stays whole."""
    fields = {"truncate_prompt_tokens": 5} | ({} if side is None else {"truncation_side": side})
    cut = _choices(codec_client, **fields)
    assert [c["prompt_token_ids"] for c in cut] == [kept, PROMPTS[1]]
    direct = codec_client.post("/v1/completions", json={"prompt": [kept, PROMPTS[1]], "prompt_logprobs": 4})
    assert cut == direct.json()["choices"]


def test_truncate_prompt_tokens_minus_one_keeps_the_longest_sequence_scored(client):
    long = [int(t) for t in np.random.default_rng(3).integers(0, 512, size=300)]
    too_long = client.post("/v1/completions", json={"prompt": long, "prompt_logprobs": 2})
    assert too_long.status_code == 422 and "300" in too_long.text
    answer = client.post(
        "/v1/completions", json={"prompt": long, "prompt_logprobs": 2, "truncate_prompt_tokens": -1}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["prompt_token_ids"] == long[-256:]  # the token budget


def test_truncating_below_two_tokens_is_422(client):
    body = {"prompt": [1, 2, 3], "prompt_logprobs": 2, "truncate_prompt_tokens": 1}
    response = client.post("/v1/completions", json=body)
    assert response.status_code == 422
    assert "prompt 0 is 1 token(s)" in response.text


def test_request_id_names_the_answer_as_vllm_does(client):
    answer = client.post(
        "/v1/completions", json={"prompt": [1, 2, 3], "prompt_logprobs": 2, "request_id": "abc-1"}
    )
    assert answer.json()["id"] == "cmpl-abc-1"
    assert (
        client.post("/v1/completions", json={"prompt": [1, 2, 3], "prompt_logprobs": 2})
        .json()["id"]
        .startswith("cmpl-")
    )


@pytest.fixture
def bos_teacher(zoo_cache, tmp_path):
    """The zoo teacher whose tokenizer puts <|im_start|> (id 1) before every text, as a BOS would."""
    path = tmp_path / "teacher-with-bos"
    shutil.copytree(zoo_cache / "models" / "teacher", path)
    spec = json.loads((path / "tokenizer.json").read_text())
    spec["post_processor"]["single"] = [
        {"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
        {"Sequence": {"id": "A", "type_id": 0}},
    ]
    spec["post_processor"]["special_tokens"] = {
        "<|im_start|>": {"id": "<|im_start|>", "ids": [1], "tokens": ["<|im_start|>"]}
    }
    (path / "tokenizer.json").write_text(json.dumps(spec))
    return path


def test_add_special_tokens_false_tokenises_a_text_prompt_without_them(bos_teacher):
    engine = TransformersEngine(load_teacher_model(bos_teacher, "cpu", "float32"))
    backend = InProcessBackend(TeacherScorer(engine, token_budget=256, max_batch_size=8), 2, str(bos_teacher))
    words = load_tokenizer(str(bos_teacher))("hello there", add_special_tokens=False)["input_ids"]
    with TestClient(build_http_app(lambda: backend)) as c:
        by_default, without = (
            c.post("/v1/completions", json={"prompt": "hello there", "prompt_logprobs": 2} | extra).json()
            for extra in ({}, {"add_special_tokens": False})
        )
    assert by_default["choices"][0]["prompt_token_ids"] == [1, *words]
    assert without["choices"][0]["prompt_token_ids"] == words
