"""What `turnopd train` records per step and per evaluation.  # orchestrator -> run directory, dashboards"""

from pydantic import Field

from services.contracts.base import Contract, FiniteFloat, NonNegInt, Probability, Record


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
        description="Seconds of total_s a teacher request was in flight (None: not recorded). With "
        "[pipeline] stream_teacher part of it overlaps the rollouts, and teacher_s is only the tail.",
    )
    teacher_overlap_s: FiniteFloat | None = Field(
        None,
        ge=0.0,
        description="Of the step's teacher requests, the seconds while its rollouts still played.",
    )
    rollout_busy_s: FiniteFloat | None = Field(
        None, ge=0.0, description="Seconds of total_s the rollout pool was playing (None: not recorded)."
    )
    learner_busy_s: FiniteFloat | None = Field(
        None, ge=0.0, description="Seconds of total_s the learner was running an update (None: not recorded)."
    )
    overlap_s: FiniteFloat | None = Field(
        None,
        ge=0.0,
        description="Seconds of total_s during which two or more pools (rollout, teacher, learner) were "
        "busy at once (None: not recorded).",
    )


class PoolLoad(Contract):
    """How busy each pool was over some wall time (a step, or a run's steps), as shares of it."""

    wall_s: FiniteFloat = Field(ge=0.0, description="The wall time the shares are of.")
    busy: dict[str, Probability] = Field(description="rollout, teacher, learner: share of wall_s busy.")
    overlap: Probability = Field(description="Share of wall_s during which two or more pools were busy.")


class SourceStepMetrics(Contract):
    """One task source's part of a step of a multi-environment run: its controller's fields and rollouts."""

    env: str
    probe: bool
    h_roll: int = Field(ge=1)
    h_hat: int = Field(ge=1)
    h_bar: FiniteFloat
    h_eff: NonNegInt | None
    h_cov: NonNegInt
    h_ctrl: NonNegInt | None
    alpha: Probability
    success_rate: Probability
    mean_turns: FiniteFloat
    trajectories: NonNegInt
    failed_episodes: NonNegInt


class StepMetrics(Record):
    """One line of ``RUN_DIR/metrics.jsonl``. In a multi-environment run the controller's fields
    (probe, h_*, alpha) are the first source's, and ``sources`` holds every source's."""

    LEFT_OUT_WHEN_NONE = ("sources", "failure_reasons")

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
    failed_episodes: NonNegInt = Field(
        description="Episodes the step could not train on: not played, or dropped before scoring."
    )
    failure_reasons: dict[str, NonNegInt] | None = Field(
        None,
        description="failed_episodes by EpisodeFailure.reason (play, env_lost, too_long, "
        "no_response); None, and left out: none failed.",
    )
    tokens: NonNegInt = Field(description="Supervised (response) tokens trained on.")
    generated_tokens: NonNegInt
    weights_version: NonNegInt
    rollout_weights_version: NonNegInt | None = Field(
        None, description="Weights version the step's rollouts were played with (None: not recorded)."
    )
    weights_lag: NonNegInt | None = Field(
        None,
        description="Versions the rollouts' weights were behind the weights this step updated (step - 1): "
        "0 is on-policy, the synchronous step; at most [pipeline] max_staleness (None: not recorded).",
    )
    times: StepTimes
    cumulative_s: FiniteFloat = Field(
        ge=0.0, description="Sum of total_s over steps 1..k (the paper's wall time)."
    )
    sources: list[SourceStepMetrics] | None = Field(
        None, description="Each task source's part (a multi-environment run); None, and left out: one source."
    )


class EvalRecord(Record):
    """One line of ``RUN_DIR/eval.jsonl``: Avg@n on the validation split after a step."""

    LEFT_OUT_WHEN_NONE = ("env", "failed_episodes")

    step: NonNegInt
    cumulative_s: FiniteFloat = Field(ge=0.0)
    split: str
    episodes: NonNegInt
    n: int = Field(ge=1)
    success_rate: Probability
    avg_at_n: Probability
    per_task_type: dict[str, Probability]
    env: str | None = Field(
        None,
        description="The task source evaluated (a multi-environment run); None, and left out: one source.",
    )
    failed_episodes: NonNegInt | None = Field(
        None,
        description="Episodes of `episodes` that could not be played (a lost env, a worker's error): "
        "counted as failures in success_rate, so a rate with failed episodes understates the model; "
        "None, and left out: every episode played.",
    )
