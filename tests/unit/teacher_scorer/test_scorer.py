"""The replica core: packed passes, per-row top_k, and a broken engine that stays broken."""

import numpy as np
import pytest
import torch

from services.errors import InputError
from services.teacher_scorer.engine import EngineBrokenError
from services.teacher_scorer.scorer import TeacherScorer
from services.teacher_scorer.transformers_engine import TransformersEngine, load_teacher_model


def test_mixed_top_k_rows_over_several_passes_equal_direct(engine, make_rows, check_scores):
    scorer = TeacherScorer(engine, token_budget=128, max_batch_size=3)
    rows = make_rows(seed=21, lengths=[60, 5, 33, 64, 2, 17, 40])
    top_ks = [3, 50, 1, 7, 7, 12, 2]
    scored, report = scorer.score(rows, top_ks)
    assert report.forward_passes >= 3  # budget and row cap both force several passes
    assert report.input_tokens == sum(r.length for r in rows)
    assert report.padded_tokens >= report.input_tokens
    for row, k, scores in zip(rows, top_ks, scored, strict=True):
        assert scores.top_ids_P_K.shape == (len(row.positions_P), k)
        check_scores(row, scores, k)


def test_validation_uses_the_engine_limits(engine, make_rows):
    scorer = TeacherScorer(engine, token_budget=64, max_batch_size=8)
    assert scorer.limits.max_length == 64
    with pytest.raises(InputError, match=r"65 tokens exceed teacher\.token_budget = 64"):
        scorer.validate(make_rows(seed=1, lengths=[65]), 5)
    with pytest.raises(InputError, match="top_k must be in"):
        scorer.validate(make_rows(seed=1, lengths=[5]), 513)


def test_an_engine_failure_fails_health_from_then_on(teacher_path, make_rows):
    model = load_teacher_model(teacher_path, "cpu", "float32")
    scorer = TeacherScorer(TransformersEngine(model), token_budget=256, max_batch_size=8)
    scorer.check_health()
    rows = make_rows(seed=2, lengths=[8])
    scorer.score(rows, [4])
    with torch.no_grad():
        saved = model.get_output_embeddings().weight.clone()
        model.get_output_embeddings().weight.fill_(float("inf"))
    with pytest.raises(EngineBrokenError):
        scorer.score(rows, [4])
    with torch.no_grad():
        model.get_output_embeddings().weight.copy_(
            saved
        )  # the engine works again, the replica stays condemned
    with pytest.raises(EngineBrokenError, match="broken"):
        scorer.check_health()
    with pytest.raises(EngineBrokenError, match="broken"):
        scorer.score(rows, [4])
    assert np.isfinite(TransformersEngine(model).score(rows, 4)[0].entropy_P).all()
