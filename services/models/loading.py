"""Load a causal LM and its tokenizer by zoo name or path; the same code serves real Qwen3 checkpoints."""

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from services.errors import ConfigError
from services.models.registry import resolve_model_dir

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

DTypeName = Literal["float32", "bfloat16", "float16"]


def torch_dtype(name: DTypeName) -> "torch.dtype":
    """The torch dtype of a settings dtype name."""
    import torch

    match name:
        case "float32":
            return torch.float32
        case "bfloat16":
            return torch.bfloat16
        case "float16":
            return torch.float16
        case _:
            raise ConfigError(f"unknown dtype {name!r}; use float32, bfloat16 or float16")


def resolve_device(device: str) -> "torch.device":
    """``'auto'`` means the first CUDA device when there is one, else the CPU; anything else as given."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but CUDA is not available on this machine")
    return resolved


def load_tokenizer(reference: str, cache_dir: Path | None = None) -> "PreTrainedTokenizerBase":
    """The tokenizer saved with a checkpoint (zoo name or path)."""
    from transformers import AutoTokenizer

    path = resolve_model_dir(reference, cache_dir)
    tokenizer: PreTrainedTokenizerBase = AutoTokenizer.from_pretrained(path)
    return tokenizer


def load_causal_lm(
    reference: str, device: str = "cpu", dtype: DTypeName = "float32", cache_dir: Path | None = None
) -> "PreTrainedModel":
    """A causal LM (zoo name or checkpoint path) on ``device`` in ``dtype``, in eval mode."""
    from transformers import AutoModelForCausalLM

    path = resolve_model_dir(reference, cache_dir)
    model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype(dtype))
    # transformers wraps `to` in a decorator whose stub mypy misreads as unbound
    model = model.to(resolve_device(device))  # type: ignore[arg-type]
    return model.eval()
