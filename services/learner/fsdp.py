"""FSDP2 applied by free functions: the model code is left alone (torchtitan's shape).

Precision: the parameters (the sharded master copy AdamW updates) are always float32. With a
bfloat16 compute dtype, FSDP2's ``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)`` casts each layer's parameters to bfloat16 when it gathers them for the
forward and backward, and reduces the gradients in float32 into the float32 shards. With a
float32 compute dtype there is no policy.
"""

from typing import Literal

import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from services.models.loading import DTypeName

ComputeDType = Literal["float32", "bfloat16"]


def master_dtype(compute_dtype: ComputeDType) -> DTypeName:
    """The dtype to load the model in before ``apply_fsdp``: float32 whatever the compute dtype."""
    match compute_dtype:
        case "float32" | "bfloat16":
            return "float32"
        case _:
            raise ValueError(f"unknown compute dtype {compute_dtype!r}; expected 'float32' or 'bfloat16'")


def mixed_precision(compute_dtype: ComputeDType) -> MixedPrecisionPolicy:
    """The FSDP2 policy of a compute dtype (float32: the default policy, which casts nothing)."""
    match compute_dtype:
        case "float32":
            return MixedPrecisionPolicy()
        case "bfloat16":
            return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        case _:
            raise ValueError(f"unknown compute dtype {compute_dtype!r}; expected 'float32' or 'bfloat16'")


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The transformer blocks of a Hugging Face causal LM (``model.model.layers``)."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise ValueError(f"{type(model).__name__} has no model.layers; cannot shard per decoder layer")
    return list(layers)


def apply_fsdp(model: nn.Module, compute_dtype: ComputeDType = "float32") -> nn.Module:
    """Shard each decoder layer, then the root (embeddings, final norm, tied/untied LM head).

    The model must hold float32 parameters (``master_dtype``); ``compute_dtype`` picks the policy.
    """
    wrong = sorted({str(p.dtype) for p in model.parameters() if p.dtype != torch.float32})
    if wrong:
        raise ValueError(f"apply_fsdp needs float32 master parameters, got {', '.join(wrong)}")
    policy = mixed_precision(compute_dtype)
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model
