"""Our /v1/completions subset against vLLM's own protocol models (the version the ``gpu`` extra pins):
our request validates as theirs, and their answer, serialised as their server sends it, parses as
ours and converts into top-K rows. Skipped where vLLM cannot be imported (docs/vllm.md)."""

import os

import numpy as np
import pytest

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
protocol = pytest.importorskip(
    "vllm.entrypoints.openai.completion.protocol", reason="vLLM is not importable here (docs/vllm.md)"
)
from vllm.logprobs import Logprob  # noqa: E402

from services.contracts.completions import CompletionRequest, CompletionResponse, ModelCard, ModelList  # noqa: E402
from services.teacher_scorer.completions_codec import completion_request, scores_from_completion  # noqa: E402
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
