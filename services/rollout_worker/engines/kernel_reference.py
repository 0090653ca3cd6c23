"""What the compiled decode kernels (``native_kernels.py``) compute, written with torch's ops: the
check every freshly loaded library must pass, and the reference of their tests (the sampler's is
``sampler.sample_tokens``)."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from services.rollout_worker.engines.native_kernels import DecodeKernels, Rope


def matmul(
    x_N_I: "torch.Tensor",
    weight_O_I: "torch.Tensor",
    norm: "torch.Tensor | None" = None,
    eps: float = 0.0,
    glu: bool = False,
    into: "torch.Tensor | None" = None,
) -> "torch.Tensor":
    """``DecodeKernels.matmul`` (``into`` is left unchanged: the sum is returned)."""
    import torch.nn.functional as F

    if norm is not None:
        x_N_I = F.rms_norm(x_N_I, x_N_I.shape[-1:], norm, eps)
    elif glu:
        gate, up = x_N_I.chunk(2, dim=-1)
        x_N_I = F.silu(gate) * up
    y_N_O = x_N_I @ weight_O_I.T
    return y_N_O if into is None else into + y_N_O


def rotate(x_H_d: "torch.Tensor", rope: "Rope", position: int, first_head: int) -> "torch.Tensor":
    """Heads ``x`` (from head ``first_head`` of ``rope.qk_norm`` on), RMS-normed and rotated."""
    import torch.nn.functional as F

    weight = rope.qk_norm[first_head : first_head + x_H_d.shape[0]]
    normed = F.rms_norm(x_H_d, x_H_d.shape[-1:], eps=rope.eps) * weight
    half = x_H_d.shape[-1] // 2
    return normed * rope.cos[position] + normed.roll(half, dims=-1) * rope.sin[position]


def decode_attention(
    qkv_N_F: "torch.Tensor",
    kvs: Sequence["torch.Tensor"],
    positions: Sequence[int],
    layer: int,
    heads: int,
    kv_heads: int,
    dim: int,
    rope: "Rope | None" = None,
) -> tuple["torch.Tensor", list["torch.Tensor"]]:
    """``DecodeKernels.decode_attention`` on copies: (the output, the slots as it leaves them)."""
    import torch
    import torch.nn.functional as F

    outputs, slots = [], []
    for row, (kv, position) in enumerate(zip(kvs, positions, strict=True)):
        q = qkv_N_F[row, : heads * dim].view(heads, dim)
        k = qkv_N_F[row, heads * dim : (heads + kv_heads) * dim].view(kv_heads, dim)
        v = qkv_N_F[row, (heads + kv_heads) * dim : (heads + 2 * kv_heads) * dim].view(kv_heads, dim)
        if rope is not None:
            q, k = rotate(q, rope, position, 0), rotate(k, rope, position, heads)
        kv = kv.clone()
        kv[layer, 0, :, position], kv[layer, 1, :, position] = k, v
        keys, values = kv[layer, 0, None, :, : position + 1], kv[layer, 1, None, :, : position + 1]
        out = F.scaled_dot_product_attention(q.view(1, heads, 1, dim), keys, values, enable_gqa=True)
        outputs.append(out.reshape(-1))
        slots.append(kv)
    return torch.stack(outputs), slots


def disagreements(kernels: "DecodeKernels", seed: int = 0) -> list[str]:
    """Where ``kernels`` and the references above differ on a small random grouped-query problem
    (empty: nowhere), every option of both kernels tried."""
    import torch

    from services.rollout_worker.engines.native_kernels import Rope, slot_batch
    from services.rollout_worker.engines.sampler import sample_tokens

    failures = []
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> "torch.Tensor":
        return torch.randn(*shape, generator=generator)

    x, gated, w, norm, into = randn(5, 40), randn(5, 80), randn(24, 40), randn(40), randn(5, 24)
    cases = {
        "matmul": (kernels.matmul(x, w), matmul(x, w)),
        "matmul with RMSNorm": (kernels.matmul(x, w, norm=norm, eps=1e-6), matmul(x, w, norm, 1e-6)),
        "matmul with SiLU gate": (kernels.matmul(gated, w, glu=True), matmul(gated, w, glu=True)),
        "matmul into": (kernels.matmul(x, w, into=into.clone()), matmul(x, w, into=into)),
    }
    heads, kv_heads, dim, positions = 4, 2, 8, [5, 0]
    rope = Rope(randn(heads + kv_heads, dim), randn(8, dim), randn(8, dim), 1e-6)
    for name, with_rope in (("decode_attention", None), ("decode_attention with rope", rope)):
        kvs = [randn(2, 2, kv_heads, 8, dim) for _ in positions]
        qkv = randn(len(positions), (heads + 2 * kv_heads) * dim)
        want, want_slots = decode_attention(qkv, kvs, positions, 1, heads, kv_heads, dim, with_rope)
        batch = slot_batch(kvs, positions, heads // kv_heads)
        got = kernels.decode_attention(qkv, batch, 1, heads, kv_heads, dim, with_rope)
        cases[name] = (got, want)
        if not all(torch.allclose(a, b, atol=1e-5) for a, b in zip(kvs, want_slots, strict=True)):
            failures.append(f"{name}: the slots")
    logits = randn(3, 50) * 4
    for temperature in (1.0, 0.7, 0.0):
        want_ids, want_logprobs = sample_tokens(logits, temperature, torch.Generator().manual_seed(seed))
        ids, logprobs = kernels.sample(logits, temperature, torch.Generator().manual_seed(seed))
        if not torch.equal(ids, want_ids):
            failures.append(
                f"sample at temperature {temperature}: tokens {ids.tolist()}, not {want_ids.tolist()}"
            )
        cases[f"sample's log-probs at temperature {temperature}"] = (logprobs, want_logprobs)
    for name, (got, want) in cases.items():
        if not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
            failures.append(f"{name}: max difference {(got - want).abs().max().item():.2e}")
    return failures
