"""The vLLM teacher engine around vLLM's calls: one generate at a time, a health check that does not
queue behind a batch, vLLM's limits, its flat log-probs, and its exceptions mapped to ours."""

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from services.errors import EngineBrokenError, InputError
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.validation import TeacherLimits, validate_row
from services.teacher_scorer.vllm_engine import (
    VllmEngine,
    convert_prompt_logprobs,
    scoring_kwargs,
    supports_flat_logprobs,
    teacher_llm_kwargs,
)
from services.vllm_support.limits import prompt_fits, scoring_max_model_len

ROW = ScoreRow(np.array([1, 2, 3]), np.array([1, 2]))


@dataclass
class Entry:
    logprob: float


@dataclass
class FlatShaped:
    """``vllm.logprobs.FlatLogprobs``'s fields: per position, the actual token first, then the top-K."""

    start_indices: list[int] = field(default_factory=list)
    end_indices: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.start_indices)

    def append(self, pairs: list[tuple[int, float]]) -> None:
        self.start_indices.append(len(self.token_ids))
        self.token_ids += [t for t, _ in pairs]
        self.logprobs += [lp for _, lp in pairs]
        self.end_indices.append(len(self.token_ids))


class SlowLLM:
    """Answers after ``release`` is set; counts how many generate calls overlap."""

    def __init__(self) -> None:
        self.model_config = SimpleNamespace(max_model_len=33)
        self.release = threading.Event()
        self.started = threading.Event()
        self.active = self.most_active = self.calls = 0
        self.error: Exception | None = None

    def generate(self, prompts, params, use_tqdm=True):
        self.calls += 1
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        self.started.set()
        self.release.wait(5)
        self.active -= 1
        if self.error is not None:
            raise self.error
        entries = [None] + [{t: Entry(-0.1), 0: Entry(-3.0)} for t in prompts[0]["prompt_token_ids"][1:]]
        return [SimpleNamespace(prompt_logprobs=entries) for _ in prompts]


def engine_over(llm, stall_limit_s=600.0) -> VllmEngine:
    return VllmEngine(llm, dict, vocab_size=100, max_logprobs=20, stall_limit_s=stall_limit_s)


def test_generate_calls_never_overlap():
    llm = SlowLLM()
    engine = engine_over(llm)
    threads = [threading.Thread(target=engine.score, args=([ROW], 1)) for _ in range(3)]
    for t in threads:
        t.start()
    llm.started.wait(5)
    time.sleep(0.05)
    llm.release.set()
    for t in threads:
        t.join(5)
    assert (llm.calls, llm.most_active) == (3, 1)


def test_the_health_check_reads_a_busy_engine_without_generating():
    llm = SlowLLM()
    engine = engine_over(llm)
    scoring = threading.Thread(target=engine.score, args=([ROW], 1))
    scoring.start()
    llm.started.wait(5)
    engine.check_health()  # busy and young: alive, and no second generate
    assert llm.calls == 1
    engine._stall_limit_s = 0.0
    with pytest.raises(EngineBrokenError, match="a vLLM scoring batch has run for"):
        engine.check_health()
    llm.release.set()
    scoring.join(5)
    engine.check_health()  # idle: a real 2-token probe
    assert (llm.calls, llm.most_active) == (2, 1)


def test_vllm_exceptions_become_input_errors_or_a_broken_engine():
    llm = SlowLLM()
    llm.release.set()
    engine = engine_over(llm)
    llm.error = ValueError("Requested prompt logprobs of 50, which is greater than max allowed: 20")
    with pytest.raises(InputError, match="vLLM rejected the request: Requested prompt logprobs"):
        engine.score([ROW], 1)
    llm.error = Exception("EngineCore encountered an issue")
    with pytest.raises(EngineBrokenError, match="vLLM generate failed: Exception: EngineCore"):
        engine.check_health()


def test_the_context_is_read_from_the_engine_and_is_one_below_max_model_len():
    llm = SlowLLM()
    assert engine_over(llm).max_context == 32
    assert scoring_max_model_len(None, 256) == 256  # all the model can take: 255 to score
    assert scoring_max_model_len(100, 256) == 101
    assert scoring_max_model_len(256, 256) == 256
    limits = TeacherLimits(
        vocab_size=100, max_context=engine_over(llm).max_context, token_budget=64, max_top_k=20
    )
    for length in (31, 32, 33):
        row = ScoreRow(np.arange(length) % 100, np.array([1]))
        accepted = True
        try:
            validate_row(0, row, limits)
        except InputError:
            accepted = False
        assert accepted == prompt_fits(length, 33) == (length <= 32)


def test_flat_log_probs_convert_like_dicts_and_duplicates_count_once():
    flat, dicts = FlatShaped(), [None]
    flat.append([])
    for actual, top in [(2, [(2, -0.2), (7, -1.9)]), (3, [(9, -0.3), (7, -1.1)])]:
        lp_actual = dict(top).get(actual, -4.0)
        flat.append([(actual, lp_actual), *top])  # the actual token first, again in the top-K if it is
        dicts.append({actual: Entry(lp_actual), **{t: Entry(lp) for t, lp in top}})
    a, b = convert_prompt_logprobs(flat, ROW, 2), convert_prompt_logprobs(dicts, ROW, 2)
    for x, y in zip(a.__dict__.values(), b.__dict__.values(), strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.top_ids_P_K, [[2, 7], [9, 7]])
    np.testing.assert_allclose(a.token_logprob_P, [-0.2, -4.0])


def test_requests_and_engine_arguments():
    assert scoring_kwargs(5, flat=True) == {
        "max_tokens": 1,
        "prompt_logprobs": 5,
        "detokenize": False,
        "flat_logprobs": True,
    }
    assert "flat_logprobs" not in scoring_kwargs(5, flat=False)
    assert not supports_flat_logprobs(dict)
    assert supports_flat_logprobs(SimpleNamespace(__struct_fields__=("n", "flat_logprobs")))
    settings = TeacherSettings(vllm_max_logprobs=64, vllm_enable_prefix_caching=True, dtype="bfloat16")
    kwargs = teacher_llm_kwargs(settings, Path("/t"), 257)
    assert kwargs == {
        "model": "/t",
        "dtype": "bfloat16",
        "max_model_len": 257,
        "gpu_memory_utilization": 0.85,
        "enable_prefix_caching": True,
        "max_logprobs": 64,
        "skip_tokenizer_init": True,
    }
