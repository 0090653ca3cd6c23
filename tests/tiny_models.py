"""Tiny random Qwen3 checkpoints for tests (built once per cache directory, reused)."""

from pathlib import Path

import torch


def build_tiny_qwen3(path: Path, seed: int, vocab: int = 64, hidden: int = 32, layers: int = 2) -> Path:
    """Save a seeded, randomly initialised Qwen3ForCausalLM in Hugging Face format at ``path``."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    if (path / "config.json").is_file():
        return path
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
        tie_word_embeddings=True,
    )
    Qwen3ForCausalLM(config).save_pretrained(path)
    return path
