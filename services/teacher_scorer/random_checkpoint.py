"""Random-weight Qwen3 checkpoints for tests and benchmarks of the scorer, built once into a cache.

They stand in for a trained teacher where only the arithmetic matters (does the service return
exactly what a forward of the checkpoint gives?); the model zoo provides trained ones.
"""

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from services.cache_dir import resolve_cache_dir


@dataclass(frozen=True)
class RandomQwen3Spec:
    vocab_size: int = 512
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    max_context: int = 512
    seed: int = 0

    @property
    def name(self) -> str:
        return (
            f"random-qwen3-v{self.vocab_size}-h{self.hidden_size}-l{self.num_layers}"
            f"-a{self.num_heads}-c{self.max_context}-s{self.seed}"
        )


def cache_root() -> Path:
    """``$TURNOPD_CACHE_DIR``, else ``~/.cache/turnopd``."""
    return resolve_cache_dir()


def write_random_qwen3(path: Path, spec: RandomQwen3Spec) -> Path:
    """Write a seeded random ``Qwen3ForCausalLM`` with ``save_pretrained`` to ``path``."""
    config = Qwen3Config(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.hidden_size * 2,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=max(1, spec.num_heads // 2),
        head_dim=spec.hidden_size // spec.num_heads,
        max_position_embeddings=spec.max_context,
        tie_word_embeddings=False,
    )
    torch.manual_seed(spec.seed)
    model = Qwen3ForCausalLM(config)
    # The default init (std 0.02) gives near-uniform next-token distributions; widen the output
    # head so the top-K is decisive, as in a trained model.
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, 1.0)
    model.save_pretrained(path)
    return path


def cached_random_qwen3(spec: RandomQwen3Spec, root: Path | None = None) -> Path:
    """The checkpoint directory for ``spec`` under ``<root>/teacher-scorer/``, building it on first use."""
    target = (root or cache_root()) / "teacher-scorer" / spec.name
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build aside and rename, so concurrent test processes never see a half-written checkpoint.
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=target.parent))
    write_random_qwen3(staging, spec)
    try:
        staging.rename(target)
    except OSError:
        if not (target / "config.json").is_file():
            raise
        shutil.rmtree(staging)
    return target
