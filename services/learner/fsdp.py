"""FSDP2 applied by free functions: the model code is left alone (torchtitan's shape)."""

from torch import nn
from torch.distributed.fsdp import fully_shard


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The transformer blocks of a Hugging Face causal LM (``model.model.layers``)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise ValueError(f"{type(model).__name__} has no model.layers; cannot shard per decoder layer")
    return list(layers)


def apply_fsdp(model: nn.Module) -> nn.Module:
    """Shard each decoder layer, then the root (embeddings, final norm, tied/untied LM head)."""
    for layer in decoder_layers(model):
        fully_shard(layer)
    fully_shard(model)
    return model
