"""Per-step turn statistics written by the learner and read by `turnopd diagnose`.

One line of ``RUN_DIR/turn_stats.jsonl`` per optimizer step (per step and source in a
multi-environment run).  # learner -> run directory -> diagnose
"""

from pydantic import Field, model_validator

from services.contracts.base import Contract, FiniteFloat, NonNegInt, Probability, Record


class TrajectoryTurnStats(Contract):
    """One trajectory's supervised tokens and summed token reverse KL per 0-based turn."""

    turn_tokens: list[NonNegInt] = Field(min_length=1, description="n_t: supervised tokens in turn t.")
    turn_kl_sum: list[FiniteFloat] = Field(min_length=1, description="Sum of token reverse KL in turn t.")
    success: bool
    truncated: bool
    turn_entropy_sum: list[FiniteFloat] | None = Field(
        None, description="Sum of the teacher's token entropy (nats) in turn t; None when not recorded."
    )

    @model_validator(mode="after")
    def _aligned(self) -> "TrajectoryTurnStats":
        if len(self.turn_tokens) != len(self.turn_kl_sum):
            raise ValueError(
                f"turn_tokens has {len(self.turn_tokens)} turns but turn_kl_sum has {len(self.turn_kl_sum)}"
            )
        if self.turn_entropy_sum is not None and len(self.turn_entropy_sum) != len(self.turn_tokens):
            raise ValueError(
                f"turn_tokens has {len(self.turn_tokens)} turns but turn_entropy_sum has "
                f"{len(self.turn_entropy_sum)}"
            )
        return self


class TurnStatsRecord(Record):
    """One optimizer step's batch, turn by turn."""

    LEFT_OUT_WHEN_NONE = ("env",)

    step: int = Field(ge=1)
    probe: bool
    alpha: Probability = Field(description="Loss blend coefficient used at this step.")
    h_roll: int = Field(ge=1, description="Rollout depth cap used at this step.")
    trajectories: list[TrajectoryTurnStats] = Field(min_length=1)
    env: str | None = Field(
        None,
        description="The task source of these trajectories in a multi-environment run (one record per "
        "source and step); None, and left out of the JSON: a single-source run.",
    )
