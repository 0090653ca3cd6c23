"""Learner step results.  # learner -> orchestrator"""

from pydantic import Field

from services.contracts.base import Contract, FiniteFloat, NonNegInt
from services.contracts.records import TurnStatsRecord


class LearnerStepResult(Contract):
    """Outcome of one optimizer step, with the per-turn statistics the controller and diagnose use."""

    step: int = Field(ge=1)
    loss: FiniteFloat
    mean_kl: FiniteFloat = Field(description="Token-mean top-K reverse KL over the batch.")
    tokens: NonNegInt = Field(description="Supervised tokens in the batch.")
    grad_norm: FiniteFloat = Field(ge=0.0, description="Global gradient norm before clipping.")
    weights_version: NonNegInt = Field(description="Version published after this step.")
    turn_stats: TurnStatsRecord
    forward_backward_s: FiniteFloat = Field(ge=0.0)
    optimizer_s: FiniteFloat = Field(ge=0.0)
