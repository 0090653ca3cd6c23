"""Generation with vLLM (GPU): offline ``LLM`` engine, token-id prompts, weight reload from the learner.

vLLM is an optional extra (``pip install 'turnopd[gpu]'``), imported only when this engine is
built. Written against vLLM's documented API:

* ``LLM(model=..., logprobs_mode="processed_logprobs", worker_extension_cls=...)``: processed
  log-probs are taken after temperature scaling, i.e. from the distribution actually sampled
  (the convention in ``engines.base``); raw ones would be the unscaled model's.
* prompts as ``{"prompt_token_ids": [...]}`` (a ``TokensPrompt``), one ``SamplingParams`` per
  request with ``logprobs=0`` (the sampled token's log-prob only), ``stop_token_ids``, a
  per-request ``seed`` and ``detokenize=False``.
* weights: ``llm.collective_rpc(method, args=...)`` runs a method of the worker extension
  (``vllm_worker_extension.WeightReloadExtension``) in every worker, which calls the model's
  ``load_weights``; then ``llm.reset_prefix_cache()`` drops KV blocks computed with old weights.

The request building and output conversion are plain functions, unit-tested without vLLM.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from services.errors import ConfigError, InputError
from services.rollout_worker.engines.base import (
    FinishReason,
    Generation,
    GenerationEngine,
    GenerationParams,
    next_version,
    validate_prompts,
)

if TYPE_CHECKING:
    import torch

WORKER_EXTENSION = "services.rollout_worker.engines.vllm_worker_extension.WeightReloadExtension"
RELOAD_METHOD = "turnopd_load_weights"


def import_vllm() -> ModuleType:
    """The ``vllm`` module, or a ConfigError saying how to get it."""
    try:
        import vllm
    except ImportError as exc:
        raise ConfigError(
            "models.engine is 'vllm' but vLLM is not installed (it needs a CUDA GPU); install it with "
            "`pip install 'turnopd[gpu]'` or set models.engine = 'transformers'"
        ) from exc
    return vllm


def request_seed(seed: int, index: int) -> int:
    """The sampling seed of request ``index`` in a batch seeded with ``seed``."""
    return (seed * 1_000_003 + index) % (1 << 63)


def sampling_kwargs(
    params: GenerationParams, stop_token_ids: Sequence[int], seed: int, index: int
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for request ``index`` of a batch."""
    return {
        "n": 1,
        "temperature": params.temperature,
        "top_p": 1.0,
        "max_tokens": params.max_new_tokens,
        "stop_token_ids": list(stop_token_ids),
        "logprobs": 0,
        "seed": request_seed(seed, index),
        "detokenize": False,
    }


def token_prompts(prompts: Sequence[Sequence[int]]) -> list[dict[str, list[int]]]:
    """vLLM ``TokensPrompt`` inputs for token-id prompts."""
    return [{"prompt_token_ids": [int(t) for t in prompt]} for prompt in prompts]


def generation_from_output(request_output: Any) -> Generation:
    """Convert one ``vllm.RequestOutput`` (``n=1``, ``logprobs=0``) to a ``Generation``."""
    completion = request_output.outputs[0]
    token_ids = [int(t) for t in completion.token_ids]
    if completion.logprobs is None or len(completion.logprobs) != len(token_ids):
        raise InputError("vLLM returned no per-token log-probs; requests must set logprobs=0")
    steps = zip(token_ids, completion.logprobs, strict=True)
    logprobs = [float(step[token].logprob) for token, step in steps]
    finish: FinishReason
    match completion.finish_reason:
        case "stop":
            finish = "stop"
        case "length":
            finish = "length"
        case other:
            raise InputError(f"vLLM request {request_output.request_id} ended with {other!r}")
    return Generation(token_ids=token_ids, logprobs=logprobs, finish_reason=finish)


class VLLMEngine(GenerationEngine):
    """A ``GenerationEngine`` over an in-process ``vllm.LLM``."""

    kind = "vllm"

    def __init__(
        self,
        model_path: Path,
        *,
        stop_token_ids: Sequence[int],
        vocab_size: int,
        max_positions: int,
        dtype: str = "bfloat16",
        seed: int = 0,
        gpu_memory_utilization: float = 0.5,
        max_model_len: int | None = None,
    ) -> None:
        self._vllm = import_vllm()
        self._llm = self._vllm.LLM(
            model=str(model_path),
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            enable_prefix_caching=True,
            logprobs_mode="processed_logprobs",
            worker_extension_cls=WORKER_EXTENSION,
        )
        self._stop = tuple(int(t) for t in stop_token_ids)
        self._vocab_size = vocab_size
        self._max_positions = max_model_len if max_model_len is not None else max_positions
        self._seed = seed
        self._calls = 0
        self._version = 0

    @classmethod
    def from_pretrained(
        cls,
        reference: str,
        *,
        dtype: str = "bfloat16",
        seed: int = 0,
        gpu_memory_utilization: float = 0.5,
        cache_dir: Path | None = None,
    ) -> "VLLMEngine":
        """A zoo model or checkpoint path; stop on ``<|im_end|>`` and the generation config's eos ids."""
        import_vllm()  # fail before touching the checkpoint when vLLM is missing
        from transformers import AutoConfig, GenerationConfig

        from services.agent.chat_format import end_of_turn_id
        from services.models.loading import load_tokenizer
        from services.models.registry import resolve_model_dir

        path = resolve_model_dir(reference, cache_dir)
        config = AutoConfig.from_pretrained(path)
        eos = GenerationConfig.from_model_config(config).eos_token_id
        eos_ids = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        stop = list(dict.fromkeys([end_of_turn_id(load_tokenizer(reference, cache_dir)), *eos_ids]))
        return cls(
            path,
            stop_token_ids=stop,
            vocab_size=config.vocab_size,
            max_positions=config.max_position_embeddings,
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
        )

    @property
    def weights_version(self) -> int:
        return self._version

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return self._stop

    @property
    def max_positions(self) -> int:
        return self._max_positions

    def generate(self, prompts: Sequence[Sequence[int]], params: GenerationParams) -> list[Generation]:
        validate_prompts(prompts, self._vocab_size)
        seed = params.seed if params.seed is not None else self._seed + self._calls
        self._calls += 1
        sampling = [
            self._vllm.SamplingParams(**sampling_kwargs(params, self._stop, seed, i))
            for i in range(len(prompts))
        ]
        outputs = self._llm.generate(token_prompts(prompts), sampling, use_tqdm=False)
        return [generation_from_output(o) for o in outputs]

    def load_weights(self, state_dict: Mapping[str, "torch.Tensor"], version: int) -> None:
        new_version = next_version(self._version, version)
        weights = [(name, tensor.detach().cpu()) for name, tensor in state_dict.items()]
        self._llm.collective_rpc(RELOAD_METHOD, args=(weights,))
        self._llm.reset_prefix_cache()
        self._version = new_version
