"""Methods vLLM mixes into its GPU workers (``LLM(worker_extension_cls=...)``), called by ``collective_rpc``.

Imported by qualified name inside vLLM's worker processes; it imports nothing from vLLM itself and
relies only on the worker's ``model_runner.model.load_weights`` and ``device``.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


class WeightReloadExtension:
    """Load a learner's full state dict into the worker's model in place."""

    def turnopd_load_weights(self, weights: list[tuple[str, "torch.Tensor"]]) -> int:
        """Copy ``(name, tensor)`` pairs (Hugging Face names) into the model; return how many."""
        runner: Any = self.model_runner  # type: ignore[attr-defined]
        device: Any = self.device  # type: ignore[attr-defined]
        runner.model.load_weights(weights=((name, tensor.to(device)) for name, tensor in weights))
        return len(weights)
