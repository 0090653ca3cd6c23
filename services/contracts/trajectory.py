"""One played episode as the rollout pool returns it.  # rollout_worker -> orchestrator -> learner"""

from pydantic import Field, model_validator

from services.contracts.base import Contract, FiniteFloat, NonNegInt, TokenId


class TurnRecord(Contract):
    """One model turn: the response's token span in ``Trajectory.token_ids`` and what it did."""

    index: NonNegInt = Field(description="0-based turn index.")
    response_start: NonNegInt = Field(description="First token of the model response (inclusive).")
    response_end: NonNegInt = Field(description="End of the model response (exclusive).")
    action: str | None = Field(description="Parsed action, or None when the response did not parse.")
    accepted: bool = Field(description="True when the env executed the action (parsed and admissible).")
    observation: str = Field(description="Tool/env observation (or client-side feedback) after the turn.")

    @model_validator(mode="after")
    def _span_ordered(self) -> "TurnRecord":
        if self.response_end < self.response_start:
            raise ValueError(f"turn {self.index}: response_end < response_start")
        return self


class Trajectory(Contract):
    """A multi-turn episode: token ids of the whole conversation, per-turn spans, outcome."""

    episode_id: str = Field(min_length=1)
    env: str = Field(min_length=1, description="Env backend name, e.g. 'alfworld'.")
    split: str = Field(min_length=1)
    task_type: str | None = None
    token_ids: list[TokenId] = Field(description="Prompt + all turns, as the model saw them.")
    turns: list[TurnRecord]
    sampler_logprobs: list[FiniteFloat] = Field(
        description="Sampler log-prob of each response token, turn by turn, in order."
    )
    reward: FiniteFloat
    success: bool
    truncated: bool = Field(
        description="Stopped before the episode ended: by the depth cap H_roll, or because its next turn "
        "would not fit its limit (the model's positions, or the task's max_tokens)."
    )
    weights_version: NonNegInt = Field(description="Student weights version that generated every token.")

    @model_validator(mode="after")
    def _spans_consistent(self) -> "Trajectory":
        prev_end = 0
        for i, turn in enumerate(self.turns):
            if turn.index != i:
                raise ValueError(
                    f"turn indices must be 0..{len(self.turns) - 1} in order, got {turn.index} at {i}"
                )
            if turn.response_start < prev_end or turn.response_end > len(self.token_ids):
                raise ValueError(
                    f"turn {i}: span [{turn.response_start}, {turn.response_end}) out of order or range"
                )
            prev_end = turn.response_end
        n_response = sum(t.response_end - t.response_start for t in self.turns)
        if len(self.sampler_logprobs) != n_response:
            raise ValueError(
                f"sampler_logprobs has {len(self.sampler_logprobs)} entries for {n_response} tokens"
            )
        return self

    @property
    def turn_tokens(self) -> list[int]:
        """Number of supervised (response) tokens in each turn."""
        return [t.response_end - t.response_start for t in self.turns]
