"""The Qwen3-0.6B shape with random weights, built locally from its config (no download), and a
multi-turn episode's learner micro-batch for it.

Shared by ``bench/learner_memory.py`` and ``bench/gpu_check.py``; ``layers`` shrinks the depth for
quick runs. The shape is Qwen/Qwen3-0.6B's config.json: vocabulary 151,936, hidden 1,024,
28 layers, 16 query and 8 key/value heads of 128, MLP 3,072, tied embeddings.
"""

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from services.learner.objective import MicroBatch

LAYERS = 28


def qwen3_0_6b_config(layers: int = LAYERS) -> Qwen3Config:
    return Qwen3Config(
        vocab_size=151_936,
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=layers,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40_960,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
        tie_word_embeddings=True,
        use_sliding_window=False,
        attention_dropout=0.0,
    )


def random_qwen3_0_6b(
    layers: int = LAYERS, seed: int = 0, dtype: torch.dtype = torch.float32, device: str = "cpu"
) -> Qwen3ForCausalLM:
    """A seeded random model of the shape, in ``dtype`` on ``device``."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen3ForCausalLM(qwen3_0_6b_config(layers)).to(dtype)
    return model


def matmul_parameters(model: torch.nn.Module) -> tuple[int, int]:
    """(parameters a token's forward multiplies through below the head, the LM head's): the
    embedding is a lookup, not a matmul; a tied head counts once, as the head."""
    head = model.get_output_embeddings().weight.numel()
    embedding = model.get_input_embeddings().weight.numel()
    total = sum(p.numel() for p in model.parameters())  # a tied weight once
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    return total - embedding - (0 if tied else head), head


def episode_batch(tokens: int, turn: int, vocab: int, k: int, seed: int, device: str = "cpu") -> MicroBatch:
    """One row: observation and response spans of ``turn`` tokens alternating; responses supervised."""
    gen = torch.Generator().manual_seed(seed)
    ids_B_T = torch.randint(0, vocab, (1, tokens), generator=gen)
    pos_N = torch.tensor([p for p in range(1, tokens) if (p // turn) % 2 == 1])
    n = pos_N.numel()
    top_ids_N_K = torch.stack([torch.randperm(vocab, generator=gen)[:k] for _ in range(min(n, 64))])
    top_ids_N_K = top_ids_N_K.repeat((n + 63) // 64, 1)[:n]  # 64 distinct rows, repeated: cheap to build
    top_lp_N_K = torch.log_softmax(torch.randn(n, k + 1, generator=gen) * 2, -1)[:, :k].sort(-1, True).values
    row_N = torch.zeros(n, dtype=torch.long)
    return MicroBatch(
        input_ids_B_T=ids_B_T.to(device),
        row_N=row_N.to(device),
        logit_pos_N=(pos_N - 1).to(device),
        target_N=ids_B_T[row_N, pos_N].to(device),
        top_ids_N_K=top_ids_N_K.to(device),
        top_logprobs_N_K=top_lp_N_K.to(device),
        weights_N=torch.full((n,), 1.0 / n, device=device),
        sampler_logprobs_N=torch.full((n,), -12.0, device=device),
        counts=[n],
    )
