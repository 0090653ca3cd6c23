"""Teacher top-K scoring.  # orchestrator/rollout_worker -> teacher_scorer -> orchestrator"""

from pydantic import Field, model_validator

from services.contracts.base import Contract, FiniteFloat, NonNegInt, TokenId


class ScoreSequence(Contract):
    """A token sequence and the positions to score; position i scores token i given tokens [0, i)."""

    token_ids: list[TokenId] = Field(min_length=2)
    positions: list[NonNegInt] = Field(min_length=1)

    @model_validator(mode="after")
    def _positions_inside(self) -> "ScoreSequence":
        bad = [p for p in self.positions if not 1 <= p < len(self.token_ids)]
        if bad:
            raise ValueError(f"positions {bad[:5]} outside [1, {len(self.token_ids)})")
        return self


class ScoreRequest(Contract):
    sequences: list[ScoreSequence] = Field(min_length=1)
    top_k: int = Field(50, ge=1, description="Teacher top-K support size (distill_topk).")


class SequenceScores(Contract):
    """Per scored position: top-K ids/log-probs (full-vocab log-softmax), actual token's log-prob, entropy."""

    positions: list[NonNegInt]
    top_ids: list[list[TokenId]]
    top_logprobs: list[list[FiniteFloat]]
    token_logprob: list[FiniteFloat]
    entropy: list[FiniteFloat]

    @model_validator(mode="after")
    def _aligned(self) -> "SequenceScores":
        n = len(self.positions)
        lengths = {len(self.top_ids), len(self.top_logprobs), len(self.token_logprob), len(self.entropy)}
        if lengths != {n}:
            raise ValueError(f"per-position fields must all have {n} entries")
        if any(len(a) != len(b) for a, b in zip(self.top_ids, self.top_logprobs, strict=True)):
            raise ValueError("top_ids and top_logprobs rows differ in length")
        return self


class ScoreResponse(Contract):
    results: list[SequenceScores]
