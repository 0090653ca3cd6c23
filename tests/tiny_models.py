"""Tiny random Qwen3 models for tests: in memory, or as checkpoints built once per cache directory."""

from pathlib import Path

import torch

from services.envs.game_cache import file_lock


def tiny_qwen3(seed: int, vocab: int = 64, hidden: int = 32, layers: int = 2, tied: bool = True):  # type: ignore[no-untyped-def]
    """A seeded, randomly initialised Qwen3ForCausalLM (float32)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=hidden // 2,
        max_position_embeddings=256,
        tie_word_embeddings=tied,
    )
    return Qwen3ForCausalLM(config)


def build_tiny_qwen3(path: Path, seed: int, vocab: int = 64, hidden: int = 32, layers: int = 2) -> Path:
    """Save ``tiny_qwen3(seed, ...)`` in Hugging Face format at ``path`` (once; under a file lock,
    as two xdist workers may want it at once)."""
    with file_lock(path.with_name(path.name + ".lock")):
        if not (path / "config.json").is_file():
            tiny_qwen3(seed, vocab, hidden, layers).save_pretrained(path)
    return path
