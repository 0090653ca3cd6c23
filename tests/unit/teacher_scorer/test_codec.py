"""Packed handle-path forms: JSON round trips, shape checks, lossless conversion to and from rows."""

import numpy as np
import pytest
from pydantic import ValidationError

from services.contracts.teacher import (
    PackedScoreRequest,
    PackedScoreResponse,
    ScoreRequest,
    ScoreSequence,
    TeacherReplicaStats,
)
from services.teacher_scorer.codec import (
    pack_request,
    pack_rows,
    pack_scores,
    requested_top_k,
    response_from_scores,
    rows_from_packed,
    rows_from_request,
    unpack_scores,
)

REQUEST = ScoreRequest(
    sequences=[
        ScoreSequence(token_ids=[5, 9, 2, 7], positions=[1, 3]),
        ScoreSequence(token_ids=[1, 4, 4], positions=[2]),
    ],
    top_k=3,
)


def test_packed_request_round_trips_rows():
    packed = pack_request(REQUEST)
    assert packed.lengths == [4, 3] and packed.position_counts == [2, 1] and packed.top_k == 3
    rows = rows_from_packed(packed)
    assert [r.token_ids_T.tolist() for r in rows] == [[5, 9, 2, 7], [1, 4, 4]]
    assert [r.positions_P.tolist() for r in rows] == [[1, 3], [2]]
    assert [r.token_ids_T.tolist() for r in rows_from_request(REQUEST)] == [[5, 9, 2, 7], [1, 4, 4]]


def test_unset_top_k_travels_as_none():
    request = ScoreRequest(sequences=REQUEST.sequences)
    assert request.top_k == 50 and requested_top_k(request) is None
    assert pack_request(request).top_k is None
    assert requested_top_k(REQUEST) == 3


def test_packed_scores_round_trip_and_json_shape(engine):
    rows = rows_from_request(REQUEST)
    scores = engine.score(rows, 3)
    packed = pack_scores(scores, 3)
    back = unpack_scores(packed)
    for a, b in zip(scores, back, strict=True):
        np.testing.assert_array_equal(a.top_ids_P_K, b.top_ids_P_K)
        np.testing.assert_array_equal(a.top_logprobs_P_K, b.top_logprobs_P_K)
        np.testing.assert_array_equal(a.token_logprob_P, b.token_logprob_P)
        np.testing.assert_array_equal(a.entropy_P, b.entropy_P)
    response = response_from_scores(rows, back)
    assert [r.positions for r in response.results] == [[1, 3], [2]]
    assert response.results[0].top_logprobs[1] == pytest.approx(scores[0].top_logprobs_P_K[1].tolist())


@pytest.mark.parametrize(
    "message",
    [
        pack_rows(rows_from_request(REQUEST), 3),
        pack_rows(rows_from_request(REQUEST), None),
        PackedScoreResponse(
            position_counts=[1, 0],
            top_k=2,
            top_ids=np.array([[3, 4]], dtype="<i4").tobytes(),
            top_logprobs=np.array([[-0.1, -2.0]], dtype="<f4").tobytes(),
            token_logprob=np.array([-0.1], dtype="<f4").tobytes(),
            entropy=np.array([0.5], dtype="<f4").tobytes(),
        ),
        TeacherReplicaStats(
            replica="SERVE_REPLICA::teacher#TeacherScorer#abc",
            requests=3,
            in_flight=1,
            sequences=7,
            scored_positions=40,
            batches=2,
            max_batch_requests=2,
            max_batch_sequences=5,
            forward_passes=2,
            padded_tokens=90,
            input_tokens=80,
        ),
    ],
    ids=lambda m: type(m).__name__,
)
def test_json_round_trip_and_unknown_fields(message):
    assert type(message).model_validate_json(message.model_dump_json()) == message
    data = message.model_dump()
    data["surprise"] = 1
    with pytest.raises(ValidationError, match="surprise"):
        type(message).model_validate(data)


def test_buffer_sizes_are_checked():
    good = pack_request(REQUEST)
    with pytest.raises(ValidationError, match="token_ids holds 24 bytes, lengths need 28"):
        PackedScoreRequest.model_validate({**good.model_dump(), "token_ids": good.token_ids[:-4]})
    with pytest.raises(ValidationError, match="lengths has 2 sequences, position_counts 1"):
        PackedScoreRequest.model_validate({**good.model_dump(), "position_counts": [3]})
    with pytest.raises(ValidationError, match="entropy holds 0 bytes, expected 4"):
        PackedScoreResponse(
            position_counts=[1],
            top_k=1,
            top_ids=b"\0" * 4,
            top_logprobs=b"\0" * 4,
            token_logprob=b"\0" * 4,
            entropy=b"",
        )
