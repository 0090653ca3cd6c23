"""Throughput of the teacher, rollout and learner paths on one device, with model FLOPs utilisation.

Used by ``bench/gpu_check.py`` (its CUDA part; the FLOPs model is stated there). Needs PyTorch and
Transformers only. Each measurement returns a ``Throughput``; the FLOPs formulas are pure
functions of the shape.
"""

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from qwen3_workload import episode_batch, matmul_parameters, random_qwen3_0_6b

# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity) by a substring of torch.cuda.get_device_name;
# the first match wins, so the specific names come before the generic ones.
PEAK_BF16_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),
    ("H200", 989.0),
    ("GH200", 989.0),
    ("A100", 312.0),
)


@dataclass(frozen=True)
class Shape:
    body: int  # N: parameters of the matmuls below the head
    head: int  # N_head = V x H
    layers: int
    attention_width: int  # d = heads x head_dim

    @classmethod
    def of(cls, model: Any) -> "Shape":
        body, head = matmul_parameters(model)
        config = model.config
        return cls(body, head, config.num_hidden_layers, config.num_attention_heads * config.head_dim)


def forward_flops(shape: Shape, lengths: list[int], head_positions: int) -> tuple[float, float]:
    """(FLOPs without attention, causal attention FLOPs) of one forward over sequences of ``lengths``
    with the head at ``head_positions`` positions."""
    dense = 2.0 * shape.body * sum(lengths) + 2.0 * shape.head * head_positions
    attention = 2.0 * shape.layers * shape.attention_width * sum(t * t for t in lengths)
    return dense, attention


def peak_flops(device_name: str) -> float | None:
    """The card's dense bf16 peak in FLOP/s, or None for a card not in the table."""
    for key, tflops in PEAK_BF16_TFLOPS:
        if key in device_name:
            return tflops * 1e12
    return None


@dataclass(frozen=True)
class Throughput:
    what: str  # e.g. "16 rows x 2048 tokens"
    tokens: int  # the tokens the rate counts
    seconds: float
    dense_flops: float
    attention_flops: float

    def line(self, peak: float | None) -> str:
        rate = f"{self.what}: {self.tokens / self.seconds:,.0f} tokens/s ({self.seconds:.3f} s)"
        if peak is None:
            return rate + "; MFU not computed (card not in PEAK_BF16_TFLOPS)"
        plain = self.dense_flops / self.seconds / peak
        full = (self.dense_flops + self.attention_flops) / self.seconds / peak
        return rate + f", MFU {plain:.1%} (6N convention), {full:.1%} with causal attention"


def timed(fn: Callable[[], Any], device: torch.device, repeats: int = 1) -> float:
    """Seconds per call of ``fn`` after one warm-up call, the device synchronised around."""
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / repeats


def inference_model(layers: int, device: torch.device) -> Any:
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = random_qwen3_0_6b(layers, seed=0, dtype=dtype, device=str(device))
    return model.eval().requires_grad_(False)


def teacher_scoring(layers: int, rows: int, tokens: int, top_k: int, device: torch.device) -> Throughput:
    """The transformers teacher engine on ``rows`` rows of ``tokens``, the second half scored."""
    from services.teacher_scorer.engine import ScoreRow
    from services.teacher_scorer.transformers_engine import TransformersEngine

    model = inference_model(layers, device)
    engine = TransformersEngine(model)
    rng = np.random.default_rng(0)
    batch = [
        ScoreRow(rng.integers(0, engine.vocab_size, tokens), np.arange(tokens // 2, tokens))
        for _ in range(rows)
    ]
    seconds = timed(lambda: engine.score(batch, top_k), device)
    dense, attention = forward_flops(Shape.of(model), [tokens] * rows, rows * (tokens - tokens // 2))
    return Throughput(f"{rows} rows x {tokens} tokens, top-{top_k}", rows * tokens, seconds, dense, attention)


def rollout_generation(
    layers: int, prompts: int, prompt_tokens: int, new_tokens: int, device: torch.device
) -> Throughput:
    """The transformers rollout engine: ``prompts`` prompts, ``new_tokens`` sampled each (the stop
    id is one a random model almost never draws); the rate counts generated tokens."""
    from services.rollout_worker.engines import GenerationParams
    from services.rollout_worker.engines.transformers_engine import TransformersEngine

    model = inference_model(layers, device)
    vocab = model.config.vocab_size
    engine = TransformersEngine(model, stop_token_ids=[vocab - 1], pad_token_id=0)
    rng = np.random.default_rng(1)
    batch = [rng.integers(0, vocab - 1, prompt_tokens).tolist() for _ in range(prompts)]
    params = GenerationParams(max_new_tokens=new_tokens, temperature=1.0, seed=0)
    generated: list[int] = []
    seconds = timed(
        lambda: generated.append(sum(len(g.token_ids) for g in engine.generate(batch, params))), device
    )
    total = prompt_tokens + new_tokens
    dense, attention = forward_flops(Shape.of(model), [total] * prompts, prompts * new_tokens)
    return Throughput(
        f"{prompts} prompts x {prompt_tokens} tokens, {new_tokens} new each (prefill + decode)",
        generated[-1],
        seconds,
        dense,
        attention,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def learner_update(layers: int, tokens: int, chunk: int, steps: int, device: torch.device) -> Throughput:
    """One FSDP2 rank (NCCL on CUDA, gloo on the CPU): float32 master weights, bf16 compute on CUDA,
    the chunked fused LM head, clip and AdamW, on one ``tokens``-long episode half supervised."""
    import torch.distributed as dist

    from services.learner.fsdp import apply_fsdp
    from services.learner.objective import micro_batch_loss

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
        torch.cuda.reset_peak_memory_stats(device)
    dist.init_process_group(
        "nccl" if cuda else "gloo", rank=0, world_size=1, device_id=device if cuda else None
    )
    try:
        model = random_qwen3_0_6b(layers, seed=0, dtype=torch.float32, device=str(device))
        shape = Shape.of(model)
        apply_fsdp(model, "bfloat16" if cuda else "float32")
        model.train()
        optim = torch.optim.AdamW(model.parameters(), lr=1e-5)
        mb = episode_batch(tokens, 128, model.config.vocab_size, 50, seed=2, device=str(device))

        def update() -> None:
            loss, _ = micro_batch_loss(model, mb, "tail", (0.9, 9.0), chunk_tokens=chunk)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            optim.zero_grad(set_to_none=True)

        seconds = timed(update, device, repeats=steps)
        memory = f", peak {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB allocated" if cuda else ""
    finally:
        dist.destroy_process_group()
    supervised = mb.row_N.numel()
    dense, attention = forward_flops(shape, [tokens], supervised)
    what = f"1 x {tokens} tokens, {supervised} supervised, chunk {chunk}{memory}"
    return Throughput(what, tokens, seconds, 3 * dense, 3 * attention)
