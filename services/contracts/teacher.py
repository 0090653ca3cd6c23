"""Teacher top-K scoring.  # orchestrator/rollout_worker -> teacher_scorer -> orchestrator"""

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from services.contracts.base import (
    Contract,
    FiniteFloat,
    JsonNonNegInt,
    JsonPositiveInt,
    NonNegInt,
    TokenId,
)

INT32_BYTES = 4
FLOAT32_BYTES = 4


class ScoreSequence(Contract):
    """A token sequence and the positions to score; position i scores token i given tokens [0, i),
    so every position lies in [1, len(token_ids)) (a 422 names the ones outside)."""

    token_ids: list[JsonNonNegInt] = Field(min_length=2)
    positions: list[JsonNonNegInt] = Field(min_length=1)

    @model_validator(mode="after")
    def _positions_inside(self) -> "ScoreSequence":
        bad = [p for p in self.positions if not 1 <= p < len(self.token_ids)]
        if bad:
            raise ValueError(f"positions {bad[:5]} outside [1, {len(self.token_ids)})")
        return self


class ScoreRequest(Contract):
    sequences: list[ScoreSequence] = Field(min_length=1)
    top_k: JsonPositiveInt = Field(50, description="Teacher top-K support size (distill_topk).")


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


class TeacherHealth(Contract):
    """Liveness (``/healthz``) or readiness (``/readyz``: a broken engine answers 503 instead) of one
    teacher replica."""

    # teacher_scorer -> operator / Serve health checks
    status: Literal["ok"]


# orchestrator/rollout_worker -> teacher_scorer (Ray handle path)
class PackedScoreRequest(Contract):
    """The handle-path form of a ScoreRequest: flat little-endian int32 buffers, no per-number objects.

    Sequence s owns ``token_ids[sum(lengths[:s]) : sum(lengths[:s+1])]`` and likewise for positions.
    """

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    token_ids: bytes = Field(description="int32 little-endian, all sequences concatenated.")
    lengths: list[Annotated[int, Field(ge=2)]] = Field(min_length=1)
    positions: bytes = Field(
        description="int32 little-endian, each sequence's scored positions concatenated."
    )
    position_counts: list[Annotated[int, Field(ge=1)]] = Field(min_length=1)
    top_k: int | None = Field(None, ge=1, description="None: the deployment's distill_topk.")

    @model_validator(mode="after")
    def _buffers_match_counts(self) -> "PackedScoreRequest":
        if len(self.lengths) != len(self.position_counts):
            raise ValueError(
                f"lengths has {len(self.lengths)} sequences, position_counts {len(self.position_counts)}"
            )
        if len(self.token_ids) != INT32_BYTES * sum(self.lengths):
            raise ValueError(
                f"token_ids holds {len(self.token_ids)} bytes, lengths need {INT32_BYTES * sum(self.lengths)}"
            )
        if len(self.positions) != INT32_BYTES * sum(self.position_counts):
            raise ValueError(
                f"positions holds {len(self.positions)} bytes, "
                f"position_counts need {INT32_BYTES * sum(self.position_counts)}"
            )
        return self


# teacher_scorer -> orchestrator/rollout_worker (Ray handle path)
class PackedScoreResponse(Contract):
    """The handle-path form of a ScoreResponse: row p of each buffer is the p-th scored position overall."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    position_counts: list[NonNegInt]
    top_k: int = Field(ge=1)
    top_ids: bytes = Field(description="int32 little-endian, [P, top_k].")
    top_logprobs: bytes = Field(description="float32 little-endian, [P, top_k], descending per row.")
    token_logprob: bytes = Field(description="float32 little-endian, [P].")
    entropy: bytes = Field(description="float32 little-endian, [P], nats.")

    @model_validator(mode="after")
    def _buffers_match_counts(self) -> "PackedScoreResponse":
        p = sum(self.position_counts)
        want = {
            "top_ids": INT32_BYTES * p * self.top_k,
            "top_logprobs": FLOAT32_BYTES * p * self.top_k,
            "token_logprob": FLOAT32_BYTES * p,
            "entropy": FLOAT32_BYTES * p,
        }
        for name, size in want.items():
            if len(getattr(self, name)) != size:
                raise ValueError(f"{name} holds {len(getattr(self, name))} bytes, expected {size}")
        return self


# teacher_scorer -> orchestrator (Ray handle path: ``limits``)
class TeacherContext(Contract):
    """The longest sequence a loaded teacher scores: the smaller of its context and its token budget.

    The orchestrator asks each teacher before every step, so that the rollouts never grow a
    trajectory the teacher would refuse, also after a restart changed either limit."""

    max_context: int = Field(
        ge=2,
        description="The engine's longest sequence: [teacher] max_context, else the model's "
        "max_position_embeddings (vLLM: one below its max_model_len).",
    )
    token_budget: int = Field(
        ge=2, description="[teacher] token_budget: padded tokens of one forward pass, so the longest row too."
    )

    @property
    def max_length(self) -> int:
        """The longest sequence the teacher accepts, in tokens."""
        return min(self.max_context, self.token_budget)

    @property
    def limit_text(self) -> str:
        """What sets ``max_length``, in words, for error messages."""
        if self.max_context <= self.token_budget:
            return f"the teacher's context of {self.max_context}"
        return f"teacher.token_budget = {self.token_budget} (raise it to score longer sequences)"


# teacher_scorer -> operators and tests (Ray handle path)
class TeacherReplicaStats(Contract):
    """Counters of one replica since it started."""

    replica: str = Field(description="The replica's Ray actor name.")
    requests: NonNegInt = Field(description="Requests answered (scored, rejected or failed).")
    in_flight: NonNegInt = Field(description="Requests being scored now.")
    sequences: NonNegInt
    scored_positions: NonNegInt
    batches: NonNegInt = Field(description="Serve batches run (each one or more forward passes).")
    max_batch_requests: NonNegInt = Field(description="Most distinct requests merged into one Serve batch.")
    max_batch_sequences: NonNegInt
    forward_passes: NonNegInt
    padded_tokens: NonNegInt = Field(description="Rows x longest row, summed over forward passes.")
    input_tokens: NonNegInt = Field(description="Real tokens, summed over forward passes.")
