"""Our /v1/completions subset against vLLM's own protocol models (the version the ``gpu`` extra pins):
our request validates as theirs, and their answer, serialised as their server sends it, parses as
ours and converts into top-K rows; their request, every field at its default, validates as ours and
our app answers it, as it answers the ``openai`` client. Skipped where vLLM cannot be imported
(docs/vllm.md)."""

import os

import httpx
import numpy as np
import pytest
from in_process_teacher import LoopbackTeacher

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
protocol = pytest.importorskip(
    "vllm.entrypoints.openai.completion.protocol", reason="vLLM is not importable here (docs/vllm.md)"
)
from vllm.logprobs import Logprob  # noqa: E402

from services.contracts.completions import CompletionRequest, CompletionResponse, ModelCard, ModelList  # noqa: E402
from services.teacher_scorer.completions_codec import (  # noqa: E402
    completion_request,
    rows_from_prompts,
    scores_from_completion,
)
from services.teacher_scorer.engine import ScoreRow  # noqa: E402
from services.teacher_scorer.token_probe import PROBE_TEXT  # noqa: E402

pytestmark = pytest.mark.vllm

ROW = ScoreRow(np.array([5, 7, 9], dtype=np.int64), np.array([1, 2], dtype=np.int64))


def test_our_request_validates_as_vllms():
    ours = completion_request([ROW], 2, "teacher")
    theirs = protocol.CompletionRequest.model_validate(ours.model_dump(exclude_none=True))
    assert (theirs.prompt, theirs.prompt_logprobs, theirs.max_tokens, theirs.model) == (
        [[5, 7, 9]],
        2,
        1,
        "teacher",
    )
    assert theirs.return_token_ids is True


def test_our_tokenizer_probe_validates_as_vllms():
    """The start-up probe sends text for the server to tokenise, and asks for the ids it made."""
    ours = CompletionRequest(
        model="teacher", prompt=PROBE_TEXT, prompt_logprobs=20, max_tokens=1, return_token_ids=True
    )
    theirs = protocol.CompletionRequest.model_validate(ours.model_dump(exclude_none=True))
    assert (theirs.prompt, theirs.prompt_logprobs, theirs.return_token_ids) == (PROBE_TEXT, 20, True)


def test_vllms_answer_parses_as_ours_and_converts():
    usage_type = protocol.CompletionResponse.model_fields["usage"].annotation
    theirs = protocol.CompletionResponse(
        model="teacher",
        choices=[
            protocol.CompletionResponseChoice(
                index=0,
                text="!",
                prompt_logprobs=[
                    None,
                    {7: Logprob(-0.5, 1, "a"), 3: Logprob(-1.25, 2, "b")},
                    {4: Logprob(-0.25, 1, "c"), 8: Logprob(-2.0, 2, "d"), 9: Logprob(-3.5, 6, "e")},
                ],
                prompt_token_ids=[5, 7, 9],
            )
        ],
        usage=usage_type(prompt_tokens=3, total_tokens=4, completion_tokens=1),
    )
    CompletionResponse.model_validate_json(theirs.model_dump_json())  # our contract reads theirs
    (scores,) = scores_from_completion(theirs.model_dump_json(), [ROW], 2)
    assert scores.top_ids_P_K.tolist() == [[7, 3], [4, 8]]
    np.testing.assert_array_equal(scores.token_logprob_P, [-0.5, -3.5])


def _vllms_model_list_module():
    """Where the pinned vLLM defines ``ModelList`` (its protocol modules moved between releases)."""
    import importlib

    candidates = (
        "vllm.entrypoints.openai.engine.protocol",
        "vllm.entrypoints.serve.engine.protocol",
        "vllm.entrypoints.openai.models.protocol",
        "vllm.entrypoints.openai.protocol",
    )
    for name in candidates:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "ModelList") and hasattr(module, "ModelCard"):
            return module
    pytest.fail(f"vLLM's ModelList/ModelCard are in none of {candidates}")


def test_vllms_model_list_parses_as_ours_and_ours_validates_as_theirs():
    """``GET /v1/models``: the served name and max_model_len a run reads from vLLM's answer, and our
    teacher app's answer is one vLLM's own models accept."""
    theirs_module = _vllms_model_list_module()
    card = theirs_module.ModelCard(id="teacher", max_model_len=4097, root="/models/teacher")
    theirs = theirs_module.ModelList(data=[card])
    ours = ModelList.model_validate_json(theirs.model_dump_json())
    assert [(c.id, c.object, c.max_model_len) for c in ours.data] == [("teacher", "model", 4097)]
    served = ModelList(data=[ModelCard(id="teacher", max_model_len=4097)])  # what our teacher app answers
    back = theirs_module.ModelList.model_validate(served.model_dump(mode="json"))
    assert [(c.id, c.max_model_len, c.owned_by) for c in back.data] == [("teacher", 4097, "turnopd")]


# --- vLLM's request and the openai client against our app ---

PROMPT = [3, 17, 5, 60, 2, 41, 9]
K = 5


@pytest.fixture(scope="module")
def our_app(tmp_path_factory):
    """Our teacher app on a loopback port, scoring with a tiny random Qwen3 (vocabulary 64)."""
    from tiny_models import build_tiny_qwen3

    server = LoopbackTeacher(build_tiny_qwen3(tmp_path_factory.mktemp("app") / "tiny", seed=4), top_k=K)
    server.start()
    yield server
    server.stop()


def _reference(server: LoopbackTeacher, prompt: list[int]):
    """The scores our app's scorer gives every position of ``prompt``."""
    rows = rows_from_prompts([prompt])
    scores, _ = server.backend.scorer.score(rows, [K])
    return rows, scores[0]


def _assert_scores(answer: str | bytes, server: LoopbackTeacher, prompt: list[int]) -> None:
    rows, expected = _reference(server, prompt)
    (got,) = scores_from_completion(answer, rows, K)
    np.testing.assert_array_equal(got.top_ids_P_K, expected.top_ids_P_K)
    np.testing.assert_array_equal(got.top_logprobs_P_K, expected.top_logprobs_P_K)  # %.9g: float32 exactly
    np.testing.assert_array_equal(got.token_logprob_P, expected.token_logprob_P)


def test_every_field_of_vllms_request_is_one_of_ours():
    assert sorted(set(protocol.CompletionRequest.model_fields) - set(CompletionRequest.model_fields)) == []
    assert sorted(set(CompletionRequest.model_fields) - set(protocol.CompletionRequest.model_fields)) == []


def _post(app, request) -> httpx.Response:  # type: ignore[no-untyped-def]
    """A vLLM protocol request, as vLLM's client would send it, to our app's /v1/completions."""
    return httpx.post(
        f"{app.url}/v1/completions",
        content=request.model_dump_json(),
        headers={"content-type": "application/json"},
        timeout=60,
    )


def test_vllms_request_with_every_default_validates_as_ours_and_is_answered(our_app):
    theirs = protocol.CompletionRequest(model="teacher", prompt=[PROMPT], prompt_logprobs=K, max_tokens=1)
    as_python = CompletionRequest.model_validate(theirs.model_dump(exclude_unset=False))
    as_json = CompletionRequest.model_validate_json(theirs.model_dump_json())
    assert as_python == as_json
    assert (as_json.prompts, as_json.prompt_logprobs, as_json.request_id) == ([PROMPT], K, theirs.request_id)
    answer = _post(our_app, theirs)
    assert answer.status_code == 200, answer.text
    assert answer.json()["id"] == f"cmpl-{theirs.request_id}"  # vLLM's id for the request
    _assert_scores(answer.content, our_app, PROMPT)


def test_vllms_request_with_sampling_fields_set_is_answered_alike(our_app):
    theirs = protocol.CompletionRequest(
        prompt=[PROMPT],
        prompt_logprobs=K,
        max_tokens=1,
        temperature=0.0,
        top_p=0.5,
        top_k=2,
        seed=11,
        stop=["x"],
        stop_token_ids=[2],
        repetition_penalty=1.3,
        truncate_prompt_tokens=5,
    )
    answer = _post(our_app, theirs)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["prompt_token_ids"] == PROMPT[-5:]  # vLLM's truncation side
    _assert_scores(answer.content, our_app, PROMPT[-5:])


def test_the_openai_client_scores_on_our_app(our_app):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{our_app.url}/v1", api_key="x", max_retries=0)
    completion = client.completions.create(
        model="teacher", prompt=[PROMPT], max_tokens=1, temperature=0.0, extra_body={"prompt_logprobs": K}
    )
    assert [c.index for c in completion.choices] == [0]
    assert completion.choices[0].model_extra is not None
    assert completion.choices[0].model_extra["prompt_token_ids"] == PROMPT
    _assert_scores(completion.model_dump_json(), our_app, PROMPT)
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.completions.create(
            model="teacher", prompt=[PROMPT], max_tokens=1, n=2, extra_body={"prompt_logprobs": K}
        )
    (problem,) = caught.value.response.json()["detail"]
    assert problem["loc"] == ["body", "n"] and "n = 2 cannot be honoured" in problem["msg"]
