"""Learner inputs and results.  # orchestrator <-> learner"""

from typing import Any

from pydantic import Field, model_validator

from services.contracts.arrays import PackedArray
from services.contracts.base import Contract, FiniteFloat, NonNegInt, Probability, TokenId
from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord


class LearnerSample(Contract):
    """One trajectory as the learner needs it: tokens, supervised positions, weights, teacher top-K."""

    token_ids: list[TokenId] = Field(min_length=2)
    positions: list[NonNegInt] = Field(
        min_length=1, description="Supervised (response) token indices, ascending."
    )
    turn_index: list[NonNegInt] = Field(description="0-based turn of each supervised position.")
    token_weights: list[FiniteFloat] = Field(description="Blended per-token loss weight (batch sums to 1).")
    sampler_logprobs: list[FiniteFloat] = Field(description="Sampler log-prob of each supervised token.")
    teacher_top_ids: PackedArray = Field(description="[n, K] int64 teacher top-K token ids.")
    teacher_top_logprobs: PackedArray = Field(description="[n, K] float32 teacher log-probs (full-vocab).")
    num_turns: int = Field(ge=1, description="Turns of the trajectory (for per-turn statistics).")
    success: bool
    truncated: bool
    turn_entropy_sum: list[FiniteFloat] | None = Field(
        None,
        description="The teacher's entropy (nats) summed over each turn's supervised tokens, passed on to "
        "the turn statistics; None: not recorded.",
    )

    @model_validator(mode="after")
    def _aligned(self) -> "LearnerSample":
        n = len(self.positions)
        if {len(self.turn_index), len(self.token_weights), len(self.sampler_logprobs)} != {n}:
            raise ValueError(f"per-position fields must all have {n} entries")
        if any(b <= a for a, b in zip(self.positions, self.positions[1:], strict=False)):
            raise ValueError("positions must be strictly ascending")
        if self.positions[0] < 1 or self.positions[-1] >= len(self.token_ids):
            raise ValueError(f"positions must lie in [1, {len(self.token_ids)})")
        if any(t >= self.num_turns for t in self.turn_index):
            raise ValueError(f"turn_index must be < num_turns ({self.num_turns})")
        ids, lps = self.teacher_top_ids, self.teacher_top_logprobs
        if len(ids.shape) != 2 or ids.shape != lps.shape or ids.shape[0] != n:
            raise ValueError(f"teacher arrays must both be [{n}, K], got {ids.shape} and {lps.shape}")
        if self.turn_entropy_sum is not None and len(self.turn_entropy_sum) != self.num_turns:
            raise ValueError(f"turn_entropy_sum must have num_turns ({self.num_turns}) entries")
        return self


class LearnerBatch(Contract):
    """One optimizer step's work.  # orchestrator -> learner"""

    step: int = Field(ge=1)
    probe: bool
    alpha: Probability
    h_roll: int = Field(ge=1)
    samples: list[LearnerSample] = Field(min_length=1)


class LearnerShard(Contract):
    """One rank's share of a step: its samples and their indices in the step's batch.  # orchestrator -> learner

    A rank may get no sample (fewer trajectories than ranks); it still joins the step's collectives.
    """

    step: int = Field(ge=1)
    samples: list[LearnerSample]
    sample_ids: list[NonNegInt] = Field(description="Index in the step's batch of each sample, ascending.")

    @model_validator(mode="after")
    def _ids_aligned(self) -> "LearnerShard":
        if len(self.sample_ids) != len(self.samples):
            raise ValueError(f"{len(self.sample_ids)} sample ids for {len(self.samples)} samples")
        if any(b <= a for a, b in zip(self.sample_ids, self.sample_ids[1:], strict=False)):
            raise ValueError("sample_ids must be strictly ascending")
        return self


class LearnerStop(Contract):
    """The orchestrator closes the learner: each rank returns from its loop.  # orchestrator -> learner"""


class LearnerStepResult(Contract):
    """Outcome of one optimizer step (learner -> orchestrator), with the per-turn statistics the controller and diagnose use."""

    step: int = Field(ge=1)
    loss: FiniteFloat
    mean_kl: FiniteFloat = Field(description="Token-mean top-K reverse KL over the batch.")
    tokens: NonNegInt = Field(description="Supervised tokens in the batch.")
    grad_norm: FiniteFloat = Field(
        ge=0.0, description="Global gradient norm before clipping (mean over the step's mini-batch updates)."
    )
    weights_version: NonNegInt = Field(description="Version published after this step.")
    turn_stats: TurnStatsRecord
    forward_backward_s: FiniteFloat = Field(ge=0.0)
    optimizer_s: FiniteFloat = Field(ge=0.0)


class LearnerReady(Contract):
    """A learner rank is up; ``resumed_step`` is the last optimizer step its weights include.  # learner -> orchestrator"""

    rank: NonNegInt
    world_size: int = Field(ge=1)
    resumed_step: NonNegInt
    threads: int = Field(ge=1, description="The torch CPU threads of the rank's passes.")


class LearnerRankResult(Contract):
    """One rank's share of a step's outcome; the orchestrator merges the ranks.  # learner -> orchestrator"""

    step: int = Field(ge=1)
    rank: NonNegInt
    sample_ids: list[NonNegInt] = Field(description="Indices (in the step's batch) of this rank's samples.")
    turn_stats: list[TrajectoryTurnStats]
    weighted_loss: FiniteFloat = Field(description="sum_i w_i r_i KL_i over this rank's tokens.")
    kl_sum: FiniteFloat
    tokens: NonNegInt
    grad_norm: FiniteFloat = Field(ge=0.0)
    forward_backward_s: FiniteFloat = Field(ge=0.0)
    optimizer_s: FiniteFloat = Field(ge=0.0)


class LearnerStepped(Contract):
    """A rank finished its share of a step; rank 0 hands over the new full weights too.  # learner -> orchestrator"""

    result: LearnerRankResult
    weights: Any = Field(
        None,
        description="Rank 0: the ObjectRef of the new full (unsharded, CPU) state dict; None on other ranks.",
    )


class LearnerCheckpointRequest(Contract):
    """Checkpoint now: ``step`` is the last optimizer step the ranks ran (before a learner restart).  # orchestrator -> learner"""

    step: int = Field(ge=1)


class LearnerCheckpointed(Contract):
    """A rank finished the requested checkpoint.  # learner -> orchestrator"""

    rank: NonNegInt
    step: int = Field(ge=1)


# What a rank's inbox carries.  # orchestrator -> learner
LearnerInboxMessage = LearnerShard | LearnerCheckpointRequest | LearnerStop

# What the ranks' shared outbox carries.  # learner -> orchestrator
LearnerOutboxMessage = LearnerReady | LearnerStepped | LearnerCheckpointed
