"""The vLLM engine's request building and output conversion, on fakes shaped like vLLM's objects.

vLLM needs a GPU to run; the fakes mirror its ``Logprob`` (logprob, rank, decoded_token) and
``RequestOutput.prompt_logprobs`` (None, then one dict per prompt token holding the top-K plus the
actual token). They are filled from the real teacher's full distribution, so the converted scores
must equal a direct forward. tests/unit/vllm_api checks the same code against vLLM's own classes.
"""

import importlib.util
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from services.errors import ConfigError
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.engine import EngineBrokenError, ScoreRow
from services.teacher_scorer.engine_factory import make_engine
from services.teacher_scorer.vllm_engine import (
    VllmEngine,
    convert_prompt_logprobs,
    require_vllm,
    tail_entropy,
    vllm_prompts,
)


@dataclass
class FakeLogprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class FakeRequestOutput:
    prompt_logprobs: list


class FakeLLM:
    """Answers ``generate`` as vLLM would, from a transformers model's full log-softmax."""

    def __init__(self, model, max_model_len=257):
        self.model = model
        self.model_config = SimpleNamespace(max_model_len=max_model_len)
        self.calls = []

    def generate(self, prompts, params, use_tqdm=True):
        self.calls.append((prompts, params))
        outputs = []
        for prompt in prompts:
            ids = prompt["prompt_token_ids"]
            with torch.no_grad():
                logp = torch.log_softmax(self.model(torch.tensor(ids)[None]).logits[0].double(), -1)
            entries = [None]
            for i in range(1, len(ids)):
                row = logp[i - 1]
                order = torch.argsort(row, descending=True)
                ranks = {int(t): r + 1 for r, t in enumerate(order.tolist())}
                keep = [int(t) for t in order[: params.prompt_logprobs]]
                if ids[i] not in keep:
                    keep.append(ids[i])
                entries.append({t: FakeLogprob(float(row[t]), ranks[t], None) for t in keep})
            outputs.append(FakeRequestOutput(entries))
        return outputs


@dataclass
class FakeSamplingParams:
    max_tokens: int
    prompt_logprobs: int
    detokenize: bool


def test_prompts_are_token_id_prompts():
    rows = [ScoreRow(np.array([3, 1, 4]), np.array([1])), ScoreRow(np.array([9, 2]), np.array([1]))]
    assert vllm_prompts(rows) == [{"prompt_token_ids": [3, 1, 4]}, {"prompt_token_ids": [9, 2]}]


def test_engine_over_vllm_shaped_output_equals_direct_forward(teacher_model, make_rows, check_scores):
    llm = FakeLLM(teacher_model)
    engine = VllmEngine(llm, FakeSamplingParams, vocab_size=512, max_logprobs=64)
    assert engine.schedules_own_batches and engine.max_top_k == 64 and engine.max_context == 256
    rows = make_rows(seed=4, lengths=[12, 3, 30])
    scored = engine.score(rows, 5)
    prompts, params = llm.calls[0]
    assert params == FakeSamplingParams(max_tokens=1, prompt_logprobs=5, detokenize=False)
    assert len(prompts) == 3
    for row, scores in zip(rows, scored, strict=True):
        ref = _direct(teacher_model, row)
        top, ids = ref.topk(5, -1)
        np.testing.assert_array_equal(scores.top_ids_P_K, ids.numpy())
        np.testing.assert_allclose(scores.top_logprobs_P_K, top.numpy(), atol=1e-5)
        targets = torch.as_tensor(row.token_ids_T[row.positions_P])
        np.testing.assert_allclose(
            scores.token_logprob_P, ref.gather(-1, targets[:, None])[:, 0].numpy(), atol=1e-5
        )
        # Entropy from the returned entries plus a tail bucket: a lower bound of the true entropy.
        true_entropy = -(ref.exp() * ref).sum(-1).numpy()
        assert (scores.entropy_P <= true_entropy + 1e-5).all()


def test_tail_entropy_formula_and_exactness():
    probs = np.array([0.5, 0.3])
    expected = -(0.5 * np.log(0.5) + 0.3 * np.log(0.3) + 0.2 * np.log(0.2))
    assert tail_entropy(np.log(probs)) == pytest.approx(expected)
    full = np.log(np.array([0.25, 0.25, 0.5]))
    assert tail_entropy(full) == pytest.approx(-(full * np.exp(full)).sum())


def test_with_the_full_vocabulary_returned_entropy_is_exact(teacher_model, check_scores):
    row = ScoreRow(np.array([5, 77, 300, 12, 9]), np.array([1, 2, 3, 4]))
    engine = VllmEngine(FakeLLM(teacher_model), FakeSamplingParams, vocab_size=512, max_logprobs=512)
    check_scores(row, engine.score([row], 512)[0], 512, atol=1e-4)


def test_malformed_vllm_output_is_an_engine_failure():
    row = ScoreRow(np.array([1, 2, 3]), np.array([2]))
    with pytest.raises(EngineBrokenError, match="returned none"):
        convert_prompt_logprobs(None, row, 2)
    with pytest.raises(EngineBrokenError, match="2 entries"):
        convert_prompt_logprobs([None, {}], row, 2)
    with pytest.raises(EngineBrokenError, match="1 log-probs at position 2, asked for 2"):
        convert_prompt_logprobs([None, {}, {3: FakeLogprob(-0.1, 1)}], row, 2)
    with pytest.raises(EngineBrokenError, match="omitted the prompt token 3"):
        convert_prompt_logprobs([None, {}, {4: FakeLogprob(-0.1, 1), 5: FakeLogprob(-3.0, 2)}], row, 2)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_missing_vllm_is_a_clear_config_error(teacher_path):
    with pytest.raises(ConfigError, match=r"needs the vllm package .*pip install 'turnopd\[gpu\]'"):
        require_vllm()
    with pytest.raises(ConfigError, match="needs the vllm package"):
        make_engine(TeacherSettings(engine="vllm", model=str(teacher_path)))


def _direct(model, row):
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.as_tensor(row.token_ids_T)[None]).logits[0].double(), -1)
    return logp[torch.as_tensor(row.positions_P - 1)]
