"""Methods vLLM mixes into its GPU workers (``LLM(worker_extension_cls=...)``), called by ``collective_rpc``.

Imported by qualified name inside vLLM's worker processes. The argument crosses vLLM's engine-core
boundary as a plain dict (a ``WeightsUpdate``: file path and version); the weights are read from
that file here, in the worker, and never pass through vLLM's message encoder. vLLM is imported
only for its config scope, and only where it is installed.
"""

import contextlib
from typing import Any

from services.contracts.weights import WeightsLoadReport, WeightsUpdate
from services.rollout_worker.engines.weights_file import read_weights


def load_weights_file(model: Any, update: WeightsUpdate) -> WeightsLoadReport:
    """Load the file of ``update`` into a vLLM model (``load_weights`` takes Hugging Face names and
    returns the names of the parameters it set, in vLLM's own naming, stacked ones included);
    report which of the model's parameters it left as they were."""
    expected = {name for name, _ in model.named_parameters()}
    loaded = set(model.load_weights(weights=read_weights(update.path)))
    return WeightsLoadReport(
        version=update.version, loaded=len(loaded & expected), not_loaded=sorted(expected - loaded)
    )


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
        with _vllm_config_scope(self):
            report = load_weights_file(model, request)
        return report.model_dump()
