"""The compiled decode kernels against torch's own ops, and how they are built, cached and refused."""

from pathlib import Path

import pytest
import torch

from services.rollout_worker.engines import kernel_reference as reference
from services.rollout_worker.engines import native_kernels
from services.rollout_worker.engines.native_kernels import (
    KernelBuildError,
    Rope,
    available_kernels,
    library_path,
    load_kernels,
    slot_batch,
)
from services.rollout_worker.engines.sampler import sample_tokens


@pytest.mark.parametrize(
    ("rows", "width", "out"), [(1, 256, 512), (4, 256, 8192), (5, 768, 256), (16, 37, 9)]
)
@pytest.mark.parametrize("fused", ["plain", "rms_norm", "glu", "into"])
def test_matmul_equals_torch(kernels, rows: int, width: int, out: int, fused: str):
    generator = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 2 * width if fused == "glu" else width, generator=generator)
    w, norm = torch.randn(out, width, generator=generator), torch.randn(width, generator=generator)
    into = torch.randn(rows, out, generator=generator)
    options = {
        "plain": {},
        "rms_norm": {"norm": norm, "eps": 1e-6},
        "glu": {"glu": True},
        "into": {"into": into},
    }[fused]
    want = reference.matmul(x, w, **options)
    got = kernels.matmul(x, w, **({**options, "into": into.clone()} if fused == "into" else options))
    assert got.shape == (rows, out)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=2e-4)


def test_matmul_names_the_shapes_that_do_not_fit(kernels):
    with pytest.raises(ValueError, match=r"x is \[2, 8\] but the weight \[3, 9\]"):
        kernels.matmul(torch.zeros(2, 8), torch.zeros(3, 9))
    with pytest.raises(ValueError, match="glu: x must be twice as wide"):
        kernels.matmul(torch.zeros(2, 9), torch.zeros(3, 9), glu=True)
    with pytest.raises(ValueError, match="not contiguous"):
        kernels.matmul(torch.zeros(2, 3), torch.zeros(3, 3).T)
    with pytest.raises(ValueError, match=r"into is \(2, 4\), not \[2, 3\]"):
        kernels.matmul(torch.zeros(2, 9), torch.zeros(3, 9), into=torch.zeros(2, 4))


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 2), (8, 1), (3, 3)])
@pytest.mark.parametrize("with_rope", [False, True], ids=["as-is", "normed-and-rotated"])
def test_decode_attention_writes_each_rows_key_and_value_and_equals_sdpa(
    kernels, heads: int, kv_heads: int, with_rope: bool
):
    """Rows with slots of different capacities at different positions (one at position 0), layer 1 of
    3: each row's new key and value (normed and rotated, or as they are) land at its position in
    that layer, nothing else in the slot changes, and the output equals SDPA over the slot's
    positions [0, position]."""
    generator = torch.Generator().manual_seed(heads)
    dim, layers, positions, capacities = 16, 3, [0, 300, 1023, 77], [256, 512, 1024, 256]
    kvs = [torch.randn(layers, 2, kv_heads, cap, dim, generator=generator) for cap in capacities]
    qkv = torch.randn(len(positions), (heads + 2 * kv_heads) * dim, generator=generator)
    rope = None
    if with_rope:
        tables = [torch.randn(1100, dim, generator=generator) for _ in range(2)]
        rope = Rope(torch.randn(heads + kv_heads, dim, generator=generator), *tables, eps=1e-6)
    want, want_slots = reference.decode_attention(qkv, kvs, positions, 1, heads, kv_heads, dim, rope)
    batch = slot_batch(kvs, positions, heads // kv_heads)
    got = kernels.decode_attention(qkv.clone(), batch, 1, heads, kv_heads, dim, rope)
    assert got.shape == (len(positions), heads * dim)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=2e-6)
    for kv, expected, position in zip(kvs, want_slots, positions, strict=True):
        torch.testing.assert_close(kv, expected, rtol=1e-6, atol=1e-6)
        changed = (kv != expected).nonzero()  # [layer, k|v, head, position, dim] of what is not bit-equal
        assert set(changed[:, 3].tolist()) <= {position} and set(changed[:, 0].tolist()) <= {1}


def test_a_freshly_built_library_passes_its_self_check(kernels):
    assert reference.disagreements(kernels, seed=7) == []


def test_decode_attention_is_refused_for_a_position_outside_the_slot_or_uneven_heads(kernels):
    kv = torch.zeros(1, 2, 2, 256, 8)
    with pytest.raises(ValueError, match="cannot take position 256"):
        slot_batch([kv], [256], 2)
    with pytest.raises(ValueError, match="heads 3, kv heads 2"):
        kernels.decode_attention(torch.zeros(1, 7 * 8), slot_batch([kv], [3], 1), 0, 3, 2, 8)
    assert not kv.any()  # a refused call writes nothing


def test_the_library_is_cached_per_source_and_reused(tmp_path: Path, kernels):
    built = load_kernels(tmp_path)
    assert built.path == library_path(tmp_path) and built.path.parent == tmp_path / "kernels"
    stamp = built.path.stat().st_mtime_ns
    assert load_kernels(tmp_path).path.stat().st_mtime_ns == stamp  # not rebuilt
    assert not [p for p in built.path.parent.iterdir() if p.suffix == ".partial"]


def test_without_a_compiler_the_reason_is_named_and_given_once(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler-here")
    with pytest.raises(KernelBuildError, match=r"no C compiler \(no-such-compiler-here is not on the PATH\)"):
        load_kernels(tmp_path / "a")
    reason = available_kernels(tmp_path / "b")
    assert isinstance(reason, str) and "no-such-compiler-here" in reason
    assert available_kernels(tmp_path / "b") is reason  # once per process and cache root
    assert not (tmp_path / "b" / "kernels").exists()


def test_a_failing_build_says_so_and_leaves_no_library(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CC", "false")  # exits 1 without output
    with pytest.raises(KernelBuildError, match=r"could not build decode_kernels.c \(exit 1\)"):
        load_kernels(tmp_path)
    assert list((tmp_path / "kernels").iterdir()) == []


def test_an_engine_without_kernels_keeps_torchs_ops(zoo_cache: Path, tmp_path: Path, monkeypatch):
    from services.models.loading import load_causal_lm
    from services.rollout_worker.engines import GenerationParams
    from services.rollout_worker.engines.transformers_engine import TransformersEngine

    model = load_causal_lm("student", cache_dir=zoo_cache)
    with_kernels = TransformersEngine(model, [model.config.vocab_size - 1], 0, cache_dir=tmp_path / "good")
    assert with_kernels.kernels is not None
    monkeypatch.setenv("CC", "no-such-compiler-here")
    engine = TransformersEngine(model, [model.config.vocab_size - 1], 0, cache_dir=tmp_path / "bad")
    assert engine.unsupported is None and engine.slots is not None and engine.kernels is None
    prompts = [[5, 9, 14, 2, 7] * 6, [3, 4] * 11]
    params = GenerationParams(max_new_tokens=20, temperature=0.0)
    assert [g.token_ids for g in engine.generate(prompts, params)] == [
        g.token_ids for g in with_kernels.generate(prompts, params)
    ]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sample_draws_the_samplers_tokens_from_the_same_uniforms(kernels, temperature: float):
    """The same uniform per row as ``sample_tokens``, so the same token unless a running sum lands
    within float32 rounding of a boundary; the log-probs are the tempered log-softmax's."""
    logits = torch.randn(4, 8192, generator=torch.Generator().manual_seed(1)) * 3
    same, draws = 0, 0
    for seed in range(100):
        want_ids, _ = sample_tokens(logits, temperature, torch.Generator().manual_seed(seed))
        ids, logprobs = kernels.sample(logits, temperature, torch.Generator().manual_seed(seed))
        same, draws = same + int((ids == want_ids).sum()), draws + len(ids)
        expected = torch.log_softmax(logits / temperature, dim=-1).gather(-1, ids[:, None]).squeeze(-1)
        # float32 sums over 8,192 terms: ~1e-6 vectorised, up to ~1.2e-5 where a sanitizer build
        # keeps the loop scalar (scripts/test_sanitized.sh)
        torch.testing.assert_close(logprobs, expected, rtol=0, atol=3e-5)
    assert same >= 0.99 * draws


def test_sample_follows_the_tempered_distribution(kernels):
    logits = torch.tensor([[0.0, 1.0, 2.0, -30.0, 0.5]]).expand(2000, -1).contiguous()
    generator = torch.Generator().manual_seed(0)
    counts = torch.zeros(5)
    for _ in range(10):
        ids, _ = kernels.sample(logits, 0.8, generator)
        counts += torch.bincount(ids, minlength=5)
    expected = torch.softmax(logits[0] / 0.8, dim=-1) * counts.sum()
    assert counts[3] == 0  # probability ~4e-17
    sigma = (expected * (1 - expected / counts.sum())).sqrt()
    assert ((counts - expected).abs() <= 4 * sigma + 1).all(), (counts, expected)


def test_greedy_sample_is_the_first_argmax_and_draws_no_uniform(kernels):
    logits = torch.tensor([[1.0, 3.0, 3.0, -2.0], [0.0, -1.0, -5.0, -0.5]])
    generator = torch.Generator().manual_seed(5)
    state = generator.get_state()
    ids, logprobs = kernels.sample(logits, 0.0, generator)
    assert ids.tolist() == [1, 0] and torch.equal(generator.get_state(), state)
    torch.testing.assert_close(logprobs, torch.log_softmax(logits, -1)[[0, 1], [1, 0]], rtol=0, atol=1e-6)


# The boundary: every argument the C relies on is checked before it runs (issue 64).


@pytest.mark.parametrize(
    ("argument", "bad", "complaint"),
    [
        (
            "x",
            lambda x: x.to(torch.bfloat16),
            r"skinny_matmul: x must be a contiguous CPU torch.float32 tensor, not torch.bfloat16 on cpu",
        ),
        ("x", lambda x: x.double(), r"x must be .* not torch.float64 on cpu"),
        ("weight", lambda w: w.to(torch.float16), r"skinny_matmul: w must be .* not torch.float16 on cpu"),
        (
            "weight",
            lambda w: torch.empty_like(w, device="meta"),
            r"skinny_matmul: w must be .* not torch.float32 on meta",
        ),
        ("norm", lambda n: n.to(torch.bfloat16), r"skinny_matmul: norm_weight must be .* not torch.bfloat16"),
        ("into", lambda y: y.to(torch.int32), r"skinny_matmul: y must be .* not torch.int32"),
        ("x", lambda x: x.T.contiguous().T, r"skinny_matmul: x must be .* not contiguous"),
    ],
)
def test_matmul_refuses_a_dtype_device_or_layout_the_c_cannot_read(kernels, argument, bad, complaint):
    """A bf16 or fp16 tensor is half the bytes the C reads (it would read past the buffer), a meta
    tensor has no memory at all: each is refused, naming the argument, before the C runs."""
    x, w, norm, into = torch.randn(4, 8), torch.randn(3, 8), torch.randn(8), torch.zeros(4, 3)
    arguments = {"x": x, "weight": w, "norm": norm, "into": into}
    arguments[argument] = bad(arguments[argument])
    with pytest.raises(native_kernels.KernelArgumentError, match=complaint):
        kernels.matmul(
            arguments["x"], arguments["weight"], norm=arguments["norm"], eps=1e-6, into=arguments["into"]
        )
    assert not into.any()  # nothing written


def test_decode_attention_refuses_a_slot_without_the_layer_heads_or_head_size_of_the_call(kernels):
    kv = torch.zeros(2, 2, 2, 64, 8)  # 2 layers, 2 kv heads of 8
    qkv = torch.randn(1, (4 + 2 * 2) * 8)
    batch = slot_batch([kv], [3], 2)
    assert (batch.layers, batch.kv_heads, batch.dim) == (2, 2, 8)
    for layer, kv_heads, dim in [(2, 2, 8), (-1, 2, 8), (0, 1, 8), (0, 2, 4)]:
        heads = 2 * kv_heads
        with pytest.raises(
            native_kernels.KernelArgumentError,
            match=rf"layer {layer}, {kv_heads} kv heads of {dim} for slots of 2 layers, 2 kv heads of 8",
        ):
            kernels.decode_attention(
                qkv[:, : (heads + 2 * kv_heads) * dim].contiguous(), batch, layer, heads, kv_heads, dim
            )
    assert not kv.any()


def test_decode_attention_refuses_work_sized_for_another_group_and_slots_that_differ(kernels):
    kv = torch.zeros(1, 2, 1, 64, 8)
    small = slot_batch([kv], [10], 1)  # work for a group of 1: 11 floats
    with pytest.raises(
        native_kernels.KernelArgumentError, match=r"decode_attention refused: .*work of 11 floats"
    ):
        kernels.decode_attention(torch.randn(1, (4 + 2) * 8), small, 0, 4, 1, 8)  # a group of 4 needs 44
    assert not kv.any()
    with pytest.raises(native_kernels.KernelArgumentError, match=r"differ in layers or heads"):
        slot_batch([kv, torch.zeros(1, 2, 2, 64, 8)], [0, 0], 1)
    with pytest.raises(native_kernels.KernelArgumentError, match=r"cannot take position 0"):
        slot_batch([torch.zeros(1, 2, 1, 64, 8, dtype=torch.bfloat16)], [0], 1)


def test_decode_attention_refuses_rotary_tables_of_another_dtype_or_too_few_rows(kernels):
    heads, kv_heads, dim = 2, 1, 8
    kv = torch.zeros(1, 2, kv_heads, 64, dim)
    qkv = torch.randn(1, (heads + 2 * kv_heads) * dim)
    tables = torch.randn(40, dim)
    rope = Rope(torch.randn(heads + kv_heads, dim), tables, tables.to(torch.bfloat16), 1e-6)
    with pytest.raises(native_kernels.KernelArgumentError, match=r"sin_table must be .* not torch.bfloat16"):
        kernels.decode_attention(qkv, slot_batch([kv], [3], 2), 0, heads, kv_heads, dim, rope)
    with pytest.raises(native_kernels.KernelArgumentError, match=r"rope: .* up to position 50"):
        kernels.decode_attention(
            qkv, slot_batch([kv], [50], 2), 0, heads, kv_heads, dim, Rope(rope.qk_norm, tables, tables, 1e-6)
        )
    assert not kv.any()


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "torch"])
@pytest.mark.parametrize(
    ("poison", "complaint"),
    [(float("nan"), "holds a NaN or \\+inf"), (float("inf"), "holds a NaN or \\+inf"), (None, "is all -inf")],
)
@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_a_row_without_a_distribution_is_refused_by_both_samplers(
    kernels, native, poison, complaint, temperature
):
    """Token id -1 (what the compiled sampler returned for such a row) would reach the trajectory;
    both samplers refuse the row instead, naming it."""
    from services.rollout_worker.engines.sampler import NoDistributionError

    logits = torch.randn(3, 100)
    if poison is None:
        logits[1] = float("-inf")
    else:
        logits[1, 37] = poison
    sample = kernels.sample if native else sample_tokens
    with pytest.raises(NoDistributionError, match=rf"row 1 of the logits {complaint}"):
        sample(logits, temperature, torch.Generator().manual_seed(0))


def test_a_huge_logit_over_a_small_temperature_is_refused_not_sampled(kernels):
    from services.rollout_worker.engines.sampler import NoDistributionError

    logits = torch.zeros(1, 50)
    logits[0, 3] = 3e38  # / 0.5 overflows float32 to +inf
    with pytest.raises(NoDistributionError, match="row 0 of the logits holds a NaN or \\+inf"):
        kernels.sample(logits, 0.5, torch.Generator().manual_seed(0))


def test_a_draw_at_the_very_top_takes_the_last_token_with_mass_never_a_masked_one(kernels):
    """With u = 0 the target is the whole total, which a running sum added in another order than the
    total can miss by rounding; the fallback must then take the last token with mass. Masked
    tokens (-inf) at the end of the vocabulary never have mass."""
    generator = torch.Generator().manual_seed(3)
    masked = 0
    for trial in range(200):
        logits = torch.randn(2, 700, generator=generator) * 4
        logits[:, 300 + trial :] = float("-inf")
        uniform = torch.zeros(2, 1)
        ids, logprobs = kernels.tokens_at(logits, 1.0, uniform)
        masked += int((logits.gather(-1, ids[:, None]) == float("-inf")).sum())
        assert torch.isfinite(logprobs).all(), (trial, ids)
    assert masked == 0


def test_a_nan_in_one_rows_query_stays_in_that_row_and_is_no_undefined_behaviour(kernels):
    """exp of a NaN score used to convert NaN to an int (undefined behaviour, reported by
    scripts/test_sanitized.sh's float-cast-overflow check); now NaN propagates to that row only, and
    masked scores (-inf) weigh exactly 0."""
    heads, kv_heads, dim = 2, 1, 8
    kvs = [torch.randn(1, 2, kv_heads, 16, dim) for _ in range(2)]
    qkv = torch.randn(2, (heads + 2 * kv_heads) * dim)
    qkv[0, 3] = float("nan")
    out = kernels.decode_attention(qkv.clone(), slot_batch(kvs, [5, 5], 2), 0, heads, kv_heads, dim)
    assert out[0, :dim].isnan().all() and torch.isfinite(out[0, dim:]).all() and torch.isfinite(out[1]).all()
    want, _ = reference.decode_attention(qkv, kvs, [5, 5], 0, heads, kv_heads, dim)
    torch.testing.assert_close(out[1], want[1], rtol=1e-5, atol=2e-6)
