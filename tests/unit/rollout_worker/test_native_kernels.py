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


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> native_kernels.DecodeKernels:
    """Built afresh into an empty cache root: this machine has a C compiler, so they must build."""
    return load_kernels(tmp_path_factory.mktemp("kernel-cache"))


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
        torch.testing.assert_close(logprobs, expected, rtol=0, atol=1e-5)
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
