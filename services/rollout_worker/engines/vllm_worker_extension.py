"""Methods vLLM mixes into its GPU workers (``LLM(worker_extension_cls=...)``), called by ``collective_rpc``.

Imported by qualified name inside vLLM's worker processes. The argument crosses vLLM's engine-core
boundary as a plain dict (a ``WeightsUpdate``: file path and version); the weights are read from
that file here, in the worker, and never pass through vLLM's message encoder. vLLM is imported
only for its config scope, and only where it is installed.
"""

import contextlib
from collections.abc import Callable
from typing import Any

from services.contracts.weights import WeightsLoadReport, WeightsUpdate
from services.rollout_worker.engines.weights_file import read_weights


def load_weights_file(model: Any, update: WeightsUpdate, model_config: Any = None) -> WeightsLoadReport:
    """Load the file of ``update`` into a vLLM model; report which of its parameters it left as they were.

    The model's ``load_weights`` takes Hugging Face names and returns the names of the parameters it
    set (vLLM's own naming, stacked ones included). Wherever vLLM's ``reload`` package is present
    (vLLM >= 0.32), the load runs inside vLLM's own in-place reload, as
    ``vllm.model_executor.model_loader.reload.reload_weights`` does: ``initialize_layerwise_reload``
    puts every parameter back in its checkpoint shape first, and ``finalize_layerwise_reload`` runs
    each layer's post-load processing again. That matters beyond the GPU: vLLM's CPU backend repacks
    each linear weight into its GEMM kernel's layout after loading and leaves the parameter empty
    (``dispatch_cpu_unquantized_gemm``), so a plain ``load_weights`` has nothing to write into.
    """
    expected = {name for name, _ in model.named_parameters()}
    reload = _vllm_reload()
    if reload is None:
        loaded = set(model.load_weights(weights=read_weights(update.path)))
    else:
        initialize, finalize = reload
        initialize(model)
        try:
            loaded = set(model.load_weights(weights=read_weights(update.path)))
        finally:
            finalize(model, model_config)  # a layer nothing was loaded into keeps its old tensors
        reprocess_tied_layers(model, loaded)
    return WeightsLoadReport(
        version=update.version, loaded=len(loaded & expected), not_loaded=sorted(expected - loaded)
    )


def reprocess_tied_layers(model: Any, loaded: set[str]) -> list[str]:
    """Run the post-load processing again of each layer that holds a just-loaded parameter under a
    name of its own that was not loaded (a tied ``lm_head``, which is the input embedding); return
    their names.

    vLLM's reload processes a layer only when weights were loaded into it, and a tied head receives
    none: the checkpoint has no ``lm_head.weight``. Its parameter is the embedding's and so holds the
    new values, but on vLLM's CPU backend the head multiplies through a oneDNN handle packed from the
    old ones at start-up, and would keep scoring with the weights the engine started with.
    """
    named = dict(model.named_parameters(remove_duplicate=False))
    fresh = {id(named[name]) for name in loaded if name in named}
    redone = []
    for module_name, module in model.named_modules():
        method = getattr(module, "quant_method", None)
        own = {f"{module_name}.{name}": p for name, p in module._parameters.items() if p is not None}
        if method is None or not own or not own.keys().isdisjoint(loaded):
            continue
        if any(id(p) in fresh for p in own.values()):
            method.process_weights_after_loading(module)
            redone.append(module_name)
    return redone


def _vllm_reload() -> tuple[Callable[[Any], None], Callable[[Any, Any], None]] | None:
    """vLLM's in-place reload steps (``initialize_layerwise_reload``, ``finalize_layerwise_reload``),
    or None where vLLM (or a vLLM with them) is not installed."""
    try:
        from vllm.model_executor.model_loader.reload import (
            finalize_layerwise_reload,
            initialize_layerwise_reload,
        )
    except ImportError:
        return None
    return initialize_layerwise_reload, finalize_layerwise_reload


def _vllm_config_scope(worker: Any) -> contextlib.AbstractContextManager[Any]:
    """vLLM's current-config context, as its own weight reload runs under (no-op without vLLM)."""
    try:
        from vllm.config import set_current_vllm_config
    except ImportError:
        return contextlib.nullcontext()
    config = getattr(worker, "vllm_config", None)
    return set_current_vllm_config(config) if config is not None else contextlib.nullcontext()


class WeightReloadExtension:
    """Reload the learner's weights in place from a file on the node."""

    def turnopd_load_weights(self, update: dict[str, Any]) -> dict[str, Any]:
        """Load a ``WeightsUpdate`` (as a dict); return a ``WeightsLoadReport`` (as a dict)."""
        request = WeightsUpdate.model_validate(update)
        runner: Any = self.model_runner  # type: ignore[attr-defined]
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        config: Any = getattr(self, "vllm_config", None)
        with _vllm_config_scope(self):
            report = load_weights_file(model, request, getattr(config, "model_config", None))
        for reset in ("reset_lora_state", "reset_encoder_cache", "reset_mm_cache"):  # as vLLM's reload does
            if hasattr(runner, reset):
                getattr(runner, reset)()
        return report.model_dump()
