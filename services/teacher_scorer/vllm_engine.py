"""The vLLM engine (GPU): prompt log-probs of each sequence via ``SamplingParams(prompt_logprobs=K)``.

Written against vLLM's documented offline API: ``LLM(model=...)``, ``llm.generate(prompts, params)``
with token-id prompts ``{"prompt_token_ids": [...]}``, and ``RequestOutput.prompt_logprobs``, a list
with one entry per prompt token (``None`` for the first) mapping token id -> ``Logprob(logprob,
rank, decoded_token)``. Each entry holds the K most likely tokens plus the prompt's actual token
when it is not among them. Log-probs are vLLM's default raw full-vocabulary log-softmax.

Entropy: vLLM returns only those entries, so the entropy reported by this engine is that of the
returned tokens plus one tail bucket holding the remaining mass,
``H = -sum_j p_j log p_j - r log r`` with ``r = max(0, 1 - sum_j p_j)`` over the returned entries
``j`` (top-K, and the actual token when outside it). Merging the tail into one outcome can only
lower entropy, so this is a lower bound of the full-vocabulary entropy that the transformers engine
reports; it is exact when the tail is empty.

vLLM is an optional GPU dependency (``turnopd[gpu]``), imported only when this engine is built.
"""

import importlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from services.errors import ConfigError
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.engine import (
    EngineBrokenError,
    RowScores,
    ScoreRow,
    TeacherEngine,
    checkpoint_dir,
)


class LogprobLike(Protocol):
    """What we read of vLLM's ``Logprob``."""

    logprob: float


PromptLogprobs = Sequence[Mapping[int, LogprobLike] | None]


def require_vllm() -> Any:
    """The vllm module, or a ConfigError saying how to get it."""
    try:
        return importlib.import_module("vllm")
    except ImportError:
        raise ConfigError(
            "teacher.engine = 'vllm' needs the vllm package (GPU machines: pip install 'turnopd[gpu]'); "
            "use teacher.engine = 'transformers' elsewhere"
        ) from None


def vllm_prompts(rows: Sequence[ScoreRow]) -> list[dict[str, list[int]]]:
    """Token-id prompts for ``LLM.generate``."""
    return [{"prompt_token_ids": [int(t) for t in row.token_ids_T]} for row in rows]


def tail_entropy(logprobs: np.ndarray) -> float:
    """Entropy of the given outcomes plus one tail bucket with the remaining probability mass."""
    probs = np.exp(logprobs.astype(np.float64))
    rest = max(0.0, 1.0 - float(probs.sum()))
    tail = -rest * np.log(rest) if rest > 0.0 else 0.0
    return float(-(probs * logprobs).sum() + tail)


def convert_prompt_logprobs(prompt_logprobs: PromptLogprobs | None, row: ScoreRow, top_k: int) -> RowScores:
    """Our per-position scores from one ``RequestOutput.prompt_logprobs``."""
    if prompt_logprobs is None or len(prompt_logprobs) != row.length:
        got = "none" if prompt_logprobs is None else f"{len(prompt_logprobs)} entries"
        raise EngineBrokenError(f"vLLM returned {got} of prompt log-probs for a {row.length}-token prompt")
    n = len(row.positions_P)
    top_ids = np.empty((n, top_k), dtype=np.int64)
    top_lps = np.empty((n, top_k), dtype=np.float32)
    token_lp = np.empty(n, dtype=np.float32)
    entropy = np.empty(n, dtype=np.float32)
    for j, position in enumerate(row.positions_P.tolist()):
        entries = prompt_logprobs[position]
        if entries is None or len(entries) < top_k:
            count = 0 if entries is None else len(entries)
            raise EngineBrokenError(
                f"vLLM returned {count} log-probs at position {position}, asked for {top_k}"
            )
        ids = np.fromiter(entries.keys(), dtype=np.int64, count=len(entries))
        lps = np.fromiter((e.logprob for e in entries.values()), dtype=np.float64, count=len(entries))
        order = np.argsort(-lps, kind="stable")[:top_k]
        top_ids[j], top_lps[j] = ids[order], lps[order]
        actual = int(row.token_ids_T[position])
        if actual not in entries:
            raise EngineBrokenError(f"vLLM omitted the prompt token {actual} at position {position}")
        token_lp[j] = entries[actual].logprob
        entropy[j] = tail_entropy(lps)
    return RowScores(top_ids, top_lps, token_lp, entropy)


class VllmEngine(TeacherEngine):
    """Scores rows with a vLLM ``LLM``; vLLM batches and schedules the whole Serve batch itself."""

    schedules_own_batches = True

    def __init__(
        self, llm: Any, sampling_params: Any, *, vocab_size: int, max_context: int, max_logprobs: int
    ) -> None:
        self._llm = llm
        self._sampling_params = sampling_params  # vllm.SamplingParams, the class
        self._vocab_size = vocab_size
        self._max_context = max_context
        self._max_logprobs = max_logprobs

    @classmethod
    def from_settings(cls, settings: TeacherSettings) -> "VllmEngine":
        vllm = require_vllm()
        from transformers import AutoConfig

        path = checkpoint_dir(settings.model)
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        context = settings.max_context or int(config.max_position_embeddings)
        llm = vllm.LLM(
            model=str(path),
            dtype=settings.dtype,
            max_model_len=context,
            gpu_memory_utilization=settings.vllm_gpu_memory_utilization,
            enable_prefix_caching=settings.vllm_enable_prefix_caching,
            max_logprobs=settings.vllm_max_logprobs,
        )
        return cls(
            llm,
            vllm.SamplingParams,
            vocab_size=int(config.vocab_size),
            max_context=context,
            max_logprobs=settings.vllm_max_logprobs,
        )

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def max_context(self) -> int:
        return self._max_context

    @property
    def max_top_k(self) -> int:
        return min(self._vocab_size, self._max_logprobs)

    def score(self, rows: Sequence[ScoreRow], top_k: int) -> list[RowScores]:
        params = self._sampling_params(max_tokens=1, prompt_logprobs=top_k, detokenize=False)
        try:
            outputs = self._llm.generate(vllm_prompts(rows), params, use_tqdm=False)
        except RuntimeError as exc:
            raise EngineBrokenError(f"vLLM generate failed: {exc}") from exc
        if len(outputs) != len(rows):
            raise EngineBrokenError(f"vLLM returned {len(outputs)} outputs for {len(rows)} prompts")
        return [
            convert_prompt_logprobs(out.prompt_logprobs, row, top_k)
            for out, row in zip(outputs, rows, strict=True)
        ]

    def check_health(self) -> None:
        self.score([ScoreRow(np.zeros(2, dtype=np.int64), np.ones(1, dtype=np.int64))], 1)
