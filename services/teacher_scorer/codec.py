"""Conversions between the wire forms (JSON lists, packed int32/float32 buffers) and engine rows."""

from collections.abc import Sequence

import numpy as np

from services.contracts.teacher import (
    PackedScoreRequest,
    PackedScoreResponse,
    ScoreRequest,
    ScoreResponse,
    SequenceScores,
)
from services.teacher_scorer.engine import RowScores, ScoreRow

INT32 = np.dtype("<i4")
FLOAT32 = np.dtype("<f4")


def rows_from_request(request: ScoreRequest) -> list[ScoreRow]:
    return [
        ScoreRow(np.asarray(s.token_ids, dtype=np.int64), np.asarray(s.positions, dtype=np.int64))
        for s in request.sequences
    ]


def requested_top_k(request: ScoreRequest) -> int | None:
    """The request's top_k if the caller set it, else None (the deployment's distill_topk applies)."""
    return request.top_k if "top_k" in request.model_fields_set else None


def pack_rows(rows: Sequence[ScoreRow], top_k: int | None) -> PackedScoreRequest:
    """The packed handle-path request for ``rows``."""
    return PackedScoreRequest(
        token_ids=np.concatenate([r.token_ids_T for r in rows]).astype(INT32).tobytes(),
        lengths=[r.length for r in rows],
        positions=np.concatenate([r.positions_P for r in rows]).astype(INT32).tobytes(),
        position_counts=[len(r.positions_P) for r in rows],
        top_k=top_k,
    )


def pack_request(request: ScoreRequest) -> PackedScoreRequest:
    return pack_rows(rows_from_request(request), requested_top_k(request))


def rows_from_packed(request: PackedScoreRequest) -> list[ScoreRow]:
    ids = np.frombuffer(request.token_ids, dtype=INT32).astype(np.int64)
    positions = np.frombuffer(request.positions, dtype=INT32).astype(np.int64)
    id_parts = np.split(ids, np.cumsum(request.lengths)[:-1])
    pos_parts = np.split(positions, np.cumsum(request.position_counts)[:-1])
    return [ScoreRow(t, p) for t, p in zip(id_parts, pos_parts, strict=True)]


def pack_scores(scores: Sequence[RowScores], top_k: int) -> PackedScoreResponse:
    return PackedScoreResponse(
        position_counts=[len(s.token_logprob_P) for s in scores],
        top_k=top_k,
        top_ids=np.concatenate([s.top_ids_P_K for s in scores]).astype(INT32).tobytes(),
        top_logprobs=np.concatenate([s.top_logprobs_P_K for s in scores]).astype(FLOAT32).tobytes(),
        token_logprob=np.concatenate([s.token_logprob_P for s in scores]).astype(FLOAT32).tobytes(),
        entropy=np.concatenate([s.entropy_P for s in scores]).astype(FLOAT32).tobytes(),
    )


def unpack_scores(response: PackedScoreResponse) -> list[RowScores]:
    """Per-sequence arrays from a packed response (views into its buffers)."""
    k = response.top_k
    cuts = np.cumsum(response.position_counts)[:-1]
    top_ids = np.split(np.frombuffer(response.top_ids, dtype=INT32).reshape(-1, k), cuts)
    top_lps = np.split(np.frombuffer(response.top_logprobs, dtype=FLOAT32).reshape(-1, k), cuts)
    token_lps = np.split(np.frombuffer(response.token_logprob, dtype=FLOAT32), cuts)
    entropies = np.split(np.frombuffer(response.entropy, dtype=FLOAT32), cuts)
    return [
        RowScores(i.astype(np.int64), lp, t, e)
        for i, lp, t, e in zip(top_ids, top_lps, token_lps, entropies, strict=True)
    ]


def response_from_scores(rows: Sequence[ScoreRow], scores: Sequence[RowScores]) -> ScoreResponse:
    """The JSON-shaped response: one SequenceScores per row, positions echoed back."""
    return ScoreResponse(
        results=[
            SequenceScores(
                positions=row.positions_P.tolist(),
                top_ids=s.top_ids_P_K.tolist(),
                top_logprobs=s.top_logprobs_P_K.astype(np.float64).tolist(),
                token_logprob=s.token_logprob_P.astype(np.float64).tolist(),
                entropy=s.entropy_P.astype(np.float64).tolist(),
            )
            for row, s in zip(rows, scores, strict=True)
        ]
    )
