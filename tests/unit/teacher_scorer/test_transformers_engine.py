"""The transformers engine returns exactly what a direct forward of the checkpoint gives."""

import threading
from typing import Any

import numpy as np
import pytest
import torch

from services.errors import ConfigError
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.engine import EngineBrokenError, ScoreRow
from services.teacher_scorer.transformers_engine import TransformersEngine, load_teacher_model, resolve_device
from services.torch_threads import effective_threads, use_threads

VOCAB = 512


def test_limits_come_from_the_checkpoint(engine):
    assert (engine.vocab_size, engine.max_context, engine.max_top_k) == (512, 256, 512)


@pytest.mark.parametrize("top_k", [1, 5, 50])
def test_padded_batch_equals_direct_forward(engine, make_rows, check_scores, top_k):
    rows = make_rows(seed=top_k, lengths=[3, 40, 17, 2, 64, 9])
    scored = engine.score(rows, top_k)
    assert len(scored) == len(rows)
    for row, scores in zip(rows, scored, strict=True):
        assert scores.top_ids_P_K.shape == (len(row.positions_P), top_k)
        assert (np.diff(scores.top_logprobs_P_K, axis=-1) <= 0).all()
        check_scores(row, scores, top_k)


def test_results_do_not_depend_on_batch_composition(engine, make_rows):
    rows = make_rows(seed=11, lengths=[5, 33, 12, 70, 2])
    together = engine.score(rows, 8)
    alone = [engine.score([r], 8)[0] for r in rows]
    reversed_ = engine.score(rows[::-1], 8)[::-1]
    # float32 sums blocked differently by batch shape: up to 1.19e-5 seen at log-probs near -6 (25 ulps)
    tolerance = 3e-5
    for a, b, c in zip(together, alone, reversed_, strict=True):
        for x in (b, c):
            np.testing.assert_allclose(a.top_logprobs_P_K, x.top_logprobs_P_K, atol=tolerance, rtol=0)
            np.testing.assert_allclose(a.token_logprob_P, x.token_logprob_P, atol=tolerance, rtol=0)
            np.testing.assert_allclose(a.entropy_P, x.entropy_P, atol=tolerance, rtol=0)
            assert (a.top_ids_P_K == x.top_ids_P_K).all()


def test_rows_that_do_not_want_the_entropy_skip_it_and_keep_everything_else(engine, make_rows):
    rows = make_rows(seed=12, lengths=[6, 30, 14])
    plain = [ScoreRow(r.token_ids_T, r.positions_P, wants_entropy=False) for r in rows]
    full = engine.score(rows, 8)
    skipped = engine.score(plain, 8)
    mixed = engine.score([plain[0], rows[1], plain[2]], 8)  # one row wants it: the pass computes it
    for a, b, c in zip(full, skipped, mixed, strict=True):
        for x in (b, c):
            np.testing.assert_array_equal(a.top_ids_P_K, x.top_ids_P_K)
            np.testing.assert_array_equal(a.top_logprobs_P_K, x.top_logprobs_P_K)
            np.testing.assert_array_equal(a.token_logprob_P, x.token_logprob_P)
        assert np.isnan(b.entropy_P).all() and (a.entropy_P > 0).all()
        np.testing.assert_array_equal(a.entropy_P, c.entropy_P)


def test_positions_come_back_in_the_order_asked(engine, check_scores):
    rng = np.random.default_rng(3)
    ids = rng.integers(0, VOCAB, size=20)
    row = ScoreRow(ids, np.array([19, 1, 7, 7, 2]))
    scores = engine.score([row], 4)[0]
    check_scores(row, scores, 4)
    np.testing.assert_array_equal(scores.token_logprob_P[2], scores.token_logprob_P[3])


def test_full_vocabulary_top_k_is_a_distribution(engine, make_rows):
    row = make_rows(seed=5, lengths=[10])[0]
    scores = engine.score([row], VOCAB)[0]
    mass = np.exp(scores.top_logprobs_P_K.astype(np.float64)).sum(-1)
    np.testing.assert_allclose(mass, 1.0, atol=1e-5)
    assert sorted(scores.top_ids_P_K[0].tolist()) == list(range(VOCAB))


def test_truncating_a_larger_top_k_equals_asking_for_the_smaller(engine, make_rows):
    rows = make_rows(seed=8, lengths=[30, 12])
    big = engine.score(rows, 20)
    small = engine.score(rows, 6)
    for b, s in zip(big, small, strict=True):
        t = b.truncated(6)
        np.testing.assert_array_equal(t.top_ids_P_K, s.top_ids_P_K)
        np.testing.assert_allclose(t.top_logprobs_P_K, s.top_logprobs_P_K, atol=1e-6)


def test_corrupt_weights_break_scoring_and_health(teacher_path, make_rows):
    model = load_teacher_model(teacher_path, "cpu", "float32")
    broken = TransformersEngine(model)
    broken.check_health()
    with torch.no_grad():
        model.get_output_embeddings().weight.fill_(float("nan"))
    with pytest.raises(EngineBrokenError, match="non-finite"):
        broken.score(make_rows(seed=1, lengths=[6]), 3)
    with pytest.raises(EngineBrokenError, match="non-finite"):
        broken.check_health()


def test_loading_errors_name_the_problem(tmp_path):
    with pytest.raises(ConfigError, match="no checkpoint"):
        load_teacher_model(tmp_path / "missing", "cpu", "float32")
    with pytest.raises(ConfigError, match=r"teacher\.device"):
        resolve_device("nonsense-device")
    assert resolve_device("auto").type in ("cpu", "cuda")


def test_right_padded_rows_need_no_padding_mask(engine, make_rows):
    """The engine's unmasked pass gives the masked pass's hidden states bit for bit at every real
    position (causal attention: a real token never sees the padding after it)."""
    rows = make_rows(seed=5, lengths=[5, 40, 17, 64])
    ids = engine._pad(rows)
    mask = torch.zeros_like(ids)
    for b, row in enumerate(rows):
        mask[b, : row.length] = 1
    with torch.inference_mode():
        masked = engine._decoder(input_ids=ids, attention_mask=mask).last_hidden_state
        unmasked = engine._decoder(input_ids=ids).last_hidden_state
    assert torch.equal(unmasked[mask.bool()], masked[mask.bool()])


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_are_set_in_the_thread_that_scores(teacher_path, teacher_model, make_rows, threads):
    """Serve scores in worker threads, and OpenMP counts threads per thread: the engine sets
    ``[teacher] threads`` where it scores, and the scores do not change with it."""
    engine = TransformersEngine.from_settings(TeacherSettings(model=str(teacher_path), threads=threads))
    rows = make_rows(seed=3, lengths=[5, 30])
    seen: dict[str, Any] = {}

    def score() -> None:
        use_threads(3 - threads)  # a worker thread that held the other count before
        seen["scores"] = engine.score(rows, 4)
        seen["threads"] = effective_threads()

    worker = threading.Thread(target=score)
    worker.start()
    worker.join()
    assert seen["threads"] == threads
    for got, want in zip(seen["scores"], TransformersEngine(teacher_model).score(rows, 4), strict=True):
        np.testing.assert_array_equal(got.top_ids_P_K, want.top_ids_P_K)
        np.testing.assert_allclose(got.top_logprobs_P_K, want.top_logprobs_P_K, atol=1e-5)
