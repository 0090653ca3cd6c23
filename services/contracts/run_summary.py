"""`turnopd summary RUN_DIR --json`: what a finished (or running) training run did, in one object."""

from pydantic import Field

from services.contracts.base import Contract, FiniteFloat, NonNegInt, Probability
from services.contracts.orchestrator import EvalRecord, PoolLoad


class PhaseTime(Contract):
    """Seconds spent in one phase of the step pipeline over the run, and its share of the total."""

    seconds: FiniteFloat = Field(ge=0.0)
    share: Probability


class SourceSummary(Contract):
    """One task source of a multi-environment run: its controller's depths, its evaluations."""

    env: str
    probe_steps: list[int]
    h_roll: list[int]
    h_hat: list[int]
    trajectories: NonNegInt = Field(description="Trajectories it played over the run.")
    evals: list[EvalRecord]
    success_change: FiniteFloat | None = Field(
        description="Its last evaluation's success rate minus its first's (None with fewer than two)."
    )


class RunSummary(Contract):
    steps: NonNegInt
    method: str
    wall_s: FiniteFloat = Field(ge=0.0, description="Sum of the steps' wall times (evaluations excluded).")
    mean_step_s: FiniteFloat = Field(ge=0.0)
    time_split: dict[str, PhaseTime] = Field(description="rollout, teacher, learner, other.")
    probe_steps: list[int]
    h_roll: list[int] = Field(description="Applied depth cap per step (probe steps at max_turns).")
    h_hat: list[int] = Field(description="The controller's horizon after each step.")
    generated_tokens_per_s: FiniteFloat = Field(
        ge=0.0, description="Rollout tokens per second of rollout time."
    )
    pool_load: PoolLoad | None = Field(
        None, description="Share of the steps' wall time each pool was busy (None: no step recorded it)."
    )
    weights_lag: list[NonNegInt | None] = Field(
        default_factory=list,
        description="Per step: versions the rollouts' weights were behind the weights it updated "
        "(0: on-policy; None: not recorded).",
    )
    evals: list[EvalRecord]
    success_change: FiniteFloat | None = Field(
        description="Last evaluation's success rate minus the first's (None with fewer than two; in a "
        "multi-environment run, see each source's)."
    )
    sources: list[SourceSummary] | None = Field(
        None, description="Each task source's part (a multi-environment run; None: one source)."
    )
