"""The tiny model zoo: Qwen3-architecture shapes and their seeded initialisation.

Both models share one tokenizer (the teacher scores the student's tokens id for id). Sizes are
chosen for 2 CPU cores: the teacher (~5.2M parameters with the default 8,192-id tokenizer) is
trained by imitation in about an hour; the student (~1.4M) is deliberately weaker.
"""

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from services.errors import NotFoundError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, Qwen3Config


@dataclass(frozen=True)
class ModelSpec:
    """The shape of one Qwen3-architecture causal LM (vocabulary size comes from the tokenizer)."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    max_position_embeddings: int = 8192
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


ZOO: dict[str, ModelSpec] = {
    "teacher": ModelSpec(
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=768,
    ),
    "student": ModelSpec(
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=384,
    ),
}


def zoo_spec(name: str) -> ModelSpec:
    """The spec of a zoo model by name."""
    try:
        return ZOO[name]
    except KeyError:
        raise NotFoundError(f"no zoo model named {name!r}; known: {', '.join(sorted(ZOO))}") from None


def qwen3_config(spec: ModelSpec, vocab_size: int, pad_token_id: int, eos_token_id: int) -> "Qwen3Config":
    """The Hugging Face config of ``spec`` (tied embeddings, float32 weights, no sliding window)."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": spec.rope_theta},
        tie_word_embeddings=True,
        use_sliding_window=False,
        pad_token_id=pad_token_id,
        bos_token_id=None,
        eos_token_id=eos_token_id,
        dtype="float32",
    )


def init_model(config: "Qwen3Config", seed: int) -> "PreTrainedModel":
    """A freshly initialised ``Qwen3ForCausalLM``; bitwise identical for the same config and seed.

    The global torch RNG is forked, so callers' random state is untouched.
    """
    import torch
    from transformers import Qwen3ForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    return model.eval()
