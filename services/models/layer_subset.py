"""A smaller model cut from a larger one: keep some of its decoder layers, drop the rest.

DistilBERT initialises its student from every other layer of the teacher; a student started this
way shares the teacher's embeddings, tokenizer and representation, so it knows the format at
once but, with half its layers gone, plays far worse until it is trained. ``[sft] base_layers``
uses this to start the demo's student from the household teacher. Works on any Hugging Face
decoder whose layers sit in ``model.model.layers`` (Qwen3, Llama, Mistral and the like).
"""

from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

from services.errors import ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def check_layer_choice(layers: Sequence[int], available: int) -> list[int]:
    """``layers`` as a list, or a ConfigError naming what is wrong with them for a ``available``-layer model."""
    chosen = list(layers)
    if not chosen:
        raise ConfigError("base_layers must name at least one layer")
    if any(b <= a for a, b in pairwise(chosen)):
        raise ConfigError(f"base_layers must be strictly increasing, got {chosen}")
    if chosen[0] < 0 or chosen[-1] >= available:
        raise ConfigError(
            f"base_layers {chosen} out of range: the base model has {available} layers (0..{available - 1})"
        )
    return chosen


def keep_layers(model: "PreTrainedModel", layers: Sequence[int]) -> "PreTrainedModel":
    """``model`` with only the decoder ``layers`` (in order), its config updated to match; in place."""
    import torch

    decoder = model.model
    chosen = check_layer_choice(layers, len(decoder.layers))
    decoder.layers = torch.nn.ModuleList([decoder.layers[i] for i in chosen])
    for index, layer in enumerate(decoder.layers):
        # the KV cache is indexed by the attention's layer_idx: renumber 0..n-1
        layer.self_attn.layer_idx = index
    config = model.config
    if getattr(config, "layer_types", None) is not None:
        config.layer_types = [config.layer_types[i] for i in chosen]
    config.num_hidden_layers = len(chosen)
    return model
