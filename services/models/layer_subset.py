"""A model built from chosen decoder layers of another: cut one smaller, or grow one deeper.

Cutting: DistilBERT initialises its student from every other layer of the teacher; a student
started this way shares the teacher's embeddings, tokenizer and representation, so it knows the
format at once but, with half its layers gone, plays far worse until it is trained. ``[sft]
base_layers`` uses this to start the demo's student from the household teacher.

Growing (depth up-scaling): an index named twice becomes two independent copies of that layer.
SOLAR 10.7B grew a 32-layer model to 48 layers by joining two copies of it, the first without its
last 8 layers and the second without its first 8, then continued training; progressive stacking
(Gong et al., 2019) grows BERT the same way. ``[0, 1, 2, 1, 2, 3]`` is that recipe for a 4-layer
model: 6 layers that start near the trained model's function instead of from random weights.

Works on any Hugging Face decoder whose layers sit in ``model.model.layers`` (Qwen3, Llama,
Mistral and the like).
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING

from services.errors import ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def check_layer_choice(layers: Sequence[int], available: int) -> list[int]:
    """``layers`` as a list, or a ConfigError naming what is wrong with them for a ``available``-layer model."""
    chosen = list(layers)
    if not chosen:
        raise ConfigError("base_layers must name at least one layer")
    if min(chosen) < 0 or max(chosen) >= available:
        raise ConfigError(
            f"base_layers {chosen} out of range: the base model has {available} layers (0..{available - 1})"
        )
    return chosen


def keep_layers(model: "PreTrainedModel", layers: Sequence[int]) -> "PreTrainedModel":
    """``model`` with the decoder ``layers`` in the order given (a repeated index is an independent
    copy of that layer), its config updated to match; in place."""
    import copy

    import torch

    decoder = model.model
    chosen = check_layer_choice(layers, len(decoder.layers))
    used: set[int] = set()
    built = []
    for i in chosen:
        built.append(copy.deepcopy(decoder.layers[i]) if i in used else decoder.layers[i])
        used.add(i)
    decoder.layers = torch.nn.ModuleList(built)
    for index, layer in enumerate(decoder.layers):
        # the KV cache is indexed by the attention's layer_idx: renumber 0..n-1
        layer.self_attn.layer_idx = index
    config = model.config
    if getattr(config, "layer_types", None) is not None:
        config.layer_types = [config.layer_types[i] for i in chosen]
    config.num_hidden_layers = len(chosen)
    return model
