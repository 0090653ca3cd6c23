"""Depth/blend controller messages and state.  # orchestrator <-> controller (and probe JSONL files)"""

from pydantic import Field, model_validator

from services.contracts.base import Contract, FiniteFloat, NonNegInt, Probability, Record


class ProbeStats(Contract):
    """Per-turn statistics of one uncensored full-depth probe batch (also one line of a probe JSONL).

    ``kl_per_turn[t]`` is K_t, the mean per-token reverse KL at 0-based turn t over trajectories
    reaching it; ``survivors[t]`` is n_t, how many reach turn t; ``success_turns`` are the 0-based
    final-turn indices of the successful trajectories.
    """

    step: int = Field(ge=1, description="Optimizer step k (1-based) this probe belongs to.")
    kl_per_turn: list[FiniteFloat] = Field(min_length=1)
    survivors: list[NonNegInt] = Field(min_length=1)
    success_turns: list[NonNegInt] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> "ProbeStats":
        if len(self.kl_per_turn) != len(self.survivors):
            raise ValueError(
                f"kl_per_turn has {len(self.kl_per_turn)} turns but survivors has {len(self.survivors)}"
            )
        if self.survivors[0] == 0:
            raise ValueError("survivors[0] is 0: the probe batch is empty")
        return self


class DepthState(Contract):
    """Everything the depth controller carries between steps (persisted after every step)."""

    step: NonNegInt = Field(0, description="Last step whose decision is folded into this state.")
    h_bar: FiniteFloat = Field(description="EMA horizon H_bar (0-based turn index, real-valued).")
    h_cov: NonNegInt = Field(0, description="Coverage lower bound H_cov (0 until first refresh).")
    h_eff: NonNegInt | None = Field(None, description="Last efficiency centroid H_eff (None before a probe).")
    h_ctrl: NonNegInt | None = Field(None, description="Last H_ctrl = max(H_eff, H_cov).")


class StepDecision(Record):
    """The depth controller's decision and state after step k (one line of `controller replay`)."""

    LEFT_OUT_WHEN_NONE = ("planned_from", "env")

    step: int = Field(ge=1)
    probe: bool
    h_roll: int = Field(ge=1, description="Turns collected this step: H_max on probes, else H_hat.")
    h_hat: int = Field(ge=1, description="Applied depth clip(round(H_bar_{k-1}) + 1, H_min, H_max).")
    h_bar: FiniteFloat
    h_eff: NonNegInt | None
    h_cov: NonNegInt
    h_ctrl: NonNegInt | None
    planned_from: NonNegInt | None = Field(
        None,
        description="The last step folded into the controller state that step k's plan (its H_hat) was "
        "made from: max(k-1-s, 0) under staleness s. None, and left out of the JSON: the synchronous "
        "rule, step k-1 (every file written before staleness existed).",
    )
    env: str | None = Field(
        None,
        description="The task source whose controller decided, in a multi-environment run; None, and left "
        "out of the JSON: a single-source run.",
    )

    @model_validator(mode="after")
    def _planned_before(self) -> "StepDecision":
        if self.planned_from is not None and self.planned_from >= self.step:
            raise ValueError(f"step {self.step} cannot be planned from step {self.planned_from}")
        return self


class StepPlan(Contract):
    """What the orchestrator runs at step k.  # controller -> orchestrator"""

    step: int = Field(ge=1)
    probe: bool
    h_roll: int = Field(ge=1)
    h_hat: int = Field(ge=1)
    alpha: Probability = Field(description="Loss blend coefficient (not ema_alpha).")
    weights_version: NonNegInt
