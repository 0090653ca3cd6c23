"""The loss-allocation report of `turnopd diagnose --json`.  # diagnose -> operators, report tools"""

from pydantic import Field

from services.contracts.base import Contract, FiniteFloat, NonNegInt

OptFloat = FiniteFloat | None


class PhaseStats(Contract):
    """Deep/shallow statistics over one phase (early/mid/late: first 30% / next 30% / rest of steps)."""

    name: str
    n_steps: NonNegInt
    first_step: int | None
    last_step: int | None
    alpha_mean: OptFloat = Field(description="Mean blend alpha over the phase's steps.")
    deep_shallow_kl_ratio: OptFloat = Field(description="Mean deep-third raw KL / mean shallow-third raw KL.")
    deep_support: OptFloat = Field(description="Mean survivor coverage n_t/n_0 over deep-third turns.")
    deep_loss_budget: OptFloat = Field(description="Mean deep-third share of trajectory-level loss mass.")
    deep_loss_budget_actual: OptFloat = Field(description="Same under the steps' actual blended weights.")
    gap_per_turn: list[OptFloat] = Field(
        description="Mean G_t = K_t^fail - K_t^succ per reliable-prefix turn."
    )


class TurnSummary(Contract):
    turn: NonNegInt
    reliable: bool = Field(description="Inside the reliable prefix.")
    support_frac: FiniteFloat = Field(description="Fraction of steps in which the turn is supported.")
    mean_survivors: FiniteFloat
    mean_kl: OptFloat = Field(description="Mean over steps of the token-pooled raw KL K_t.")
    gap: OptFloat = Field(description="Mean over steps of G_t.")
    loss_share: FiniteFloat = Field(description="Mean share of loss mass under the actual weights.")
    loss_share_traj: FiniteFloat = Field(
        description="Mean share of loss mass under trajectory-level weights."
    )


class DiagnosisReport(Contract):
    steps: NonNegInt
    first_step: int
    last_step: int
    reliable_prefix: NonNegInt
    shallow_turns: list[NonNegInt]
    deep_turns: list[NonNegInt]
    min_survivors: NonNegInt
    min_survivor_frac: FiniteFloat
    min_step_frac: FiniteFloat
    deep_shallow_kl_ratio: OptFloat
    deep_support: OptFloat
    deep_loss_budget: OptFloat = Field(
        description="Mean over steps of the deep third's trajectory-level share."
    )
    deep_loss_budget_actual: OptFloat
    phases: dict[str, PhaseStats]
    per_turn: list[TurnSummary]
