"""A tiny random Qwen3 teacher built once into the cache, its loaded model, an engine, a reference."""

import numpy as np
import pytest
import torch

from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.random_checkpoint import RandomQwen3Spec, cached_random_qwen3
from services.teacher_scorer.transformers_engine import TransformersEngine, load_teacher_model

SPEC = RandomQwen3Spec(vocab_size=512, hidden_size=64, num_layers=2, num_heads=4, max_context=256, seed=0)


@pytest.fixture(scope="session")
def teacher_path():
    return cached_random_qwen3(SPEC)


@pytest.fixture(scope="session")
def teacher_model(teacher_path):
    return load_teacher_model(teacher_path, "cpu", "float32")


@pytest.fixture(scope="session")
def engine(teacher_model):
    # A small logits chunk so the chunked head path is exercised too.
    return TransformersEngine(teacher_model, logits_chunk=7)


@pytest.fixture(scope="session")
def make_rows():
    return random_rows


@pytest.fixture(scope="session")
def check_scores(teacher_model):
    """``check_scores(row, scores, top_k)`` asserts the scores equal a direct forward of the teacher."""

    def check(row, scores, top_k, atol=1e-4):
        assert_matches_direct(teacher_model, row, scores, top_k, atol)

    return check


def direct_logprobs(model, token_ids) -> torch.Tensor:
    """Independent reference: full-sequence forward, fp32 log-softmax over the whole vocabulary, [T, V]."""
    with torch.no_grad():
        logits = model(torch.as_tensor(np.asarray(token_ids), dtype=torch.long)[None]).logits[0]
    return torch.log_softmax(logits.double(), dim=-1)


def random_rows(seed: int, lengths, vocab: int = SPEC.vocab_size) -> list[ScoreRow]:
    """Unseen random sequences, each scoring a random non-empty subset of its positions."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in lengths:
        ids = rng.integers(0, vocab, size=n)
        k = int(rng.integers(1, n))
        positions = np.sort(rng.choice(np.arange(1, n), size=k, replace=False))
        rows.append(ScoreRow(ids.astype(np.int64), positions.astype(np.int64)))
    return rows


def assert_matches_direct(model, row: ScoreRow, scores, top_k: int, atol: float = 1e-4) -> None:
    """Scores equal the direct forward: top-K ids and log-probs, actual token log-prob, entropy."""
    ref_T_V = direct_logprobs(model, row.token_ids_T)
    ref_P_V = ref_T_V[torch.as_tensor(row.positions_P - 1)]
    ref_top, ref_ids = ref_P_V.topk(top_k, dim=-1)
    np.testing.assert_allclose(scores.top_logprobs_P_K, ref_top.numpy(), atol=atol, rtol=0)
    # The service's ids carry exactly their reference log-probs (robust to near-ties in order)...
    np.testing.assert_allclose(
        ref_P_V.gather(-1, torch.as_tensor(scores.top_ids_P_K)).numpy(),
        scores.top_logprobs_P_K,
        atol=atol,
        rtol=0,
    )
    # ...and equal the reference ids wherever neighbouring log-probs are not within tolerance.
    gaps = np.diff(ref_top.numpy(), axis=-1)
    clear = np.ones_like(scores.top_ids_P_K, dtype=bool)
    clear[:, 1:] &= np.abs(gaps) > 10 * atol
    clear[:, :-1] &= np.abs(gaps) > 10 * atol
    assert (scores.top_ids_P_K[clear] == ref_ids.numpy()[clear]).all()
    targets = torch.as_tensor(row.token_ids_T[row.positions_P])
    np.testing.assert_allclose(
        scores.token_logprob_P, ref_P_V.gather(-1, targets[:, None])[:, 0].numpy(), atol=atol, rtol=0
    )
    ref_entropy = -(ref_P_V.exp() * ref_P_V).sum(-1)
    np.testing.assert_allclose(scores.entropy_P, ref_entropy.numpy(), atol=atol, rtol=0)


@pytest.fixture(scope="session")
def codec_kernels_built(tmp_path_factory: pytest.TempPathFactory):
    """The codec's compiled reader and writer, built afresh into an empty cache root (this machine has a
    C compiler, so they must build and pass their check against the Python codec)."""
    from services.teacher_scorer.completions_native import load_codec_kernels

    return load_codec_kernels(tmp_path_factory.mktemp("codec-cache"))


@pytest.fixture(params=["python", "compiled"])
def codec(request, codec_kernels_built):
    """Each codec test runs on the Python reader and writer (None) and on the compiled ones."""
    return None if request.param == "python" else codec_kernels_built
