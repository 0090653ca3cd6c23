"""What `turnopd train` records per step and per evaluation.  # orchestrator -> run directory, dashboards"""

from pydantic import Field

from services.contracts.base import Contract, FiniteFloat, NonNegInt, Probability


class StepTimes(Contract):
    """Wall-clock split of one step, in seconds."""

    rollout_s: FiniteFloat = Field(ge=0.0)
    teacher_s: FiniteFloat = Field(ge=0.0)
    learner_s: FiniteFloat = Field(ge=0.0)
    other_s: FiniteFloat = Field(ge=0.0, description="Controller, weight publishing, bookkeeping.")
    total_s: FiniteFloat = Field(ge=0.0)
    teacher_busy_s: FiniteFloat | None = Field(
        None,
        ge=0.0,
        description="Seconds a teacher request of this step was in flight (None: not recorded). With "
        "[pipeline] stream_teacher part of it overlaps the rollouts, and teacher_s is only the tail.",
    )
    teacher_overlap_s: FiniteFloat | None = Field(
        None, ge=0.0, description="Of teacher_busy_s, the seconds while the step's rollouts still played."
    )


class StepMetrics(Contract):
    """One line of ``RUN_DIR/metrics.jsonl``."""

    step: int = Field(ge=1)
    method: str
    probe: bool
    h_roll: int = Field(ge=1)
    h_hat: int = Field(ge=1)
    h_bar: FiniteFloat
    h_eff: NonNegInt | None
    h_cov: NonNegInt
    h_ctrl: NonNegInt | None
    alpha: Probability
    loss: FiniteFloat
    mean_kl: FiniteFloat
    grad_norm: FiniteFloat
    success_rate: Probability = Field(description="Share of this step's trajectories that succeeded.")
    truncated_rate: Probability
    mean_turns: FiniteFloat
    trajectories: NonNegInt
    failed_episodes: NonNegInt
    tokens: NonNegInt = Field(description="Supervised (response) tokens trained on.")
    generated_tokens: NonNegInt
    weights_version: NonNegInt
    times: StepTimes
    cumulative_s: FiniteFloat = Field(
        ge=0.0, description="Sum of total_s over steps 1..k (the paper's wall time)."
    )


class EvalRecord(Contract):
    """One line of ``RUN_DIR/eval.jsonl``: Avg@n on the validation split after a step."""

    step: NonNegInt
    cumulative_s: FiniteFloat = Field(ge=0.0)
    split: str
    episodes: NonNegInt
    n: int = Field(ge=1)
    success_rate: Probability
    avg_at_n: Probability
    per_task_type: dict[str, Probability]
