"""Each compiled decode kernel against its torch reference over random shapes and values
(hypothesis), and what it refuses: the dtypes it cannot read, and the rows that name no
distribution. Run under the sanitizers too (scripts/test_sanitized.sh)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from services.rollout_worker.engines import kernel_reference as reference
from services.rollout_worker.engines.native_kernels import KernelArgumentError, Rope, slot_batch
from services.rollout_worker.engines.sampler import NoDistributionError, tokens_at

EXAMPLES = settings(max_examples=40, deadline=None)
REFUSED_DTYPES = [torch.bfloat16, torch.float16, torch.float64, torch.int32, torch.int64]


@EXAMPLES
@given(
    rows=st.integers(1, 9),
    inner=st.integers(1, 70),
    out=st.integers(1, 40),
    fused=st.sampled_from(["plain", "rms_norm", "glu", "into"]),
    scale=st.sampled_from([1e-3, 1.0, 30.0]),
    seed=st.integers(0, 2**16),
)
def test_matmul_equals_torch_for_any_shape(kernels, rows, inner, out, fused, scale, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 2 * inner if fused == "glu" else inner, generator=generator) * scale
    w = torch.randn(out, inner, generator=generator)
    options = {
        "plain": {},
        "rms_norm": {"norm": torch.randn(inner, generator=generator), "eps": 1e-6},
        "glu": {"glu": True},
        "into": {"into": torch.randn(rows, out, generator=generator)},
    }[fused]
    want = reference.matmul(x, w, **options)
    got = kernels.matmul(x, w, **({"into": options["into"].clone()} if fused == "into" else options))
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(want.abs().max())))


@EXAMPLES
@given(
    group=st.sampled_from([1, 2, 3, 4, 8]),
    kv_heads=st.integers(1, 3),
    half_dim=st.integers(1, 24),
    positions=st.lists(st.integers(0, 90), min_size=1, max_size=4),
    with_rope=st.booleans(),
    masked_scale=st.sampled_from([1.0, 40.0]),
    seed=st.integers(0, 2**16),
)
def test_decode_attention_equals_sdpa_for_any_shape(
    kernels, group, kv_heads, half_dim, positions, with_rope, masked_scale, seed
):
    """Any grouping, head size, positions (0 included) and layer; large scores (scale 40) make most
    weights underflow, where the kernel's exp is exactly 0 below -87."""
    generator = torch.Generator().manual_seed(seed)
    heads, dim, layers = group * kv_heads, 2 * half_dim, 2
    kvs = [torch.randn(layers, 2, kv_heads, 96, dim, generator=generator) for _ in positions]
    qkv = torch.randn(len(positions), (heads + 2 * kv_heads) * dim, generator=generator) * masked_scale
    rope = None
    if with_rope:
        tables = [torch.randn(96, dim, generator=generator) for _ in range(2)]
        rope = Rope(torch.randn(heads + kv_heads, dim, generator=generator), *tables, eps=1e-6)
    want, want_slots = reference.decode_attention(qkv, kvs, positions, 1, heads, kv_heads, dim, rope)
    got = kernels.decode_attention(
        qkv.clone(), slot_batch(kvs, positions, group), 1, heads, kv_heads, dim, rope
    )
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(want.abs().max())))
    for kv, expected in zip(kvs, want_slots, strict=True):
        torch.testing.assert_close(kv, expected, rtol=1e-5, atol=1e-5)


@EXAMPLES
@given(
    rows=st.integers(1, 5),
    vocab=st.integers(1, 300),
    temperature=st.sampled_from([0.0, 0.3, 1.0, 2.5]),
    masked=st.floats(0.0, 0.95),
    uniform=st.lists(
        st.sampled_from([0.0, 1e-7, 0.5, 1.0 - 2**-24]) | st.floats(0.0, 0.9999), min_size=5, max_size=5
    ),
    seed=st.integers(0, 2**16),
)
def test_sample_takes_the_token_whose_cdf_interval_holds_the_draw(
    kernels, rows, vocab, temperature, masked, uniform, seed
):
    """For any row (a share of it masked to -inf, one token always left) and any uniform, the edges
    0 and 1 - 2^-24 included: the compiled pick has mass, its interval of torch's CDF holds the target
    within float32 rounding, and its log-prob is the tempered log-softmax's. Greedy: torch's argmax."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=generator) * 5
    logits[torch.rand(rows, vocab, generator=generator) < masked] = float("-inf")
    logits[:, int(torch.randint(vocab, (1,), generator=generator))] = 0.0
    u = torch.tensor(uniform[:rows], dtype=torch.float32)[:, None]
    ids, logprobs = kernels.tokens_at(logits, temperature, None if temperature == 0 else u)
    assert torch.isfinite(logits.gather(-1, ids[:, None])).all()
    if temperature == 0:
        assert torch.equal(ids, tokens_at(logits, 0.0, None)[0])
        want = torch.log_softmax(logits, -1).gather(-1, ids[:, None]).squeeze(-1)
    else:
        probs = torch.softmax(logits.double() / temperature, -1)
        cdf = probs.cumsum(-1)
        target = (1.0 - u.double().squeeze(-1)) * cdf[:, -1]
        below = cdf.gather(-1, ids[:, None]).squeeze(-1) - probs.gather(-1, ids[:, None]).squeeze(-1)
        above = cdf.gather(-1, ids[:, None]).squeeze(-1)
        assert (below <= target + 1e-5).all() and (target <= above + 1e-5).all(), (ids, target)
        want = torch.log_softmax(logits / temperature, -1).gather(-1, ids[:, None]).squeeze(-1)
    torch.testing.assert_close(logprobs, want, rtol=0, atol=1e-5)


@EXAMPLES
@given(
    vocab=st.integers(1, 200),
    poison=st.sampled_from([float("nan"), float("inf"), "all -inf"]),
    where=st.integers(0, 199),
    temperature=st.sampled_from([0.0, 1.0]),
)
def test_both_samplers_refuse_every_row_without_a_distribution(kernels, vocab, poison, where, temperature):
    logits = torch.randn(3, vocab)
    if poison == "all -inf":
        logits[2] = float("-inf")
    else:
        logits[2, where % vocab] = poison
    complaint = "is all -inf" if poison == "all -inf" else "holds a NaN or \\+inf"
    for sample in (kernels.sample, lambda *a: tokens_at(a[0], a[1], torch.rand(3, 1))):
        with pytest.raises(NoDistributionError, match=f"row 2 of the logits {complaint}"):
            sample(logits, temperature, torch.Generator().manual_seed(0))


@pytest.mark.parametrize("dtype", REFUSED_DTYPES, ids=str)
def test_every_entry_refuses_every_dtype_it_cannot_read(kernels, dtype):
    """The matmul's operands, the slots, the rotary tables: none reaches the C in another dtype.
    (The sampler takes any floating logits and converts them, as ``sample_tokens`` does.)"""
    with pytest.raises(KernelArgumentError, match=f"not {dtype}"):
        kernels.matmul(torch.ones(2, 4).to(dtype), torch.ones(3, 4))
    with pytest.raises(KernelArgumentError, match=f"not {dtype}"):
        kernels.matmul(torch.ones(2, 4), torch.ones(3, 4).to(dtype))
    with pytest.raises(KernelArgumentError, match="cannot take position"):
        slot_batch([torch.zeros(1, 2, 1, 8, 4, dtype=dtype)], [0], 1)
    kv = torch.zeros(1, 2, 1, 8, 4)
    tables = torch.ones(8, 4)
    rope = Rope(torch.ones(2, 4).to(dtype), tables, tables, 1e-6)
    with pytest.raises(KernelArgumentError, match=f"qk_norm must be .* not {dtype}"):
        kernels.decode_attention(torch.ones(1, 12), slot_batch([kv], [0], 1), 0, 1, 1, 4, rope)
    assert not kv.any()
