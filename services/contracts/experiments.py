"""The outcome of `turnopd compare`: ``DIR/summary.json``.  # compare -> run directory -> report, users

Protocols (paper Sec. 6): an accuracy is the mean of the last ``window`` (4) evaluation points
(each an Avg@n) at or before a cutoff, reported with the population std of those points.
*Same-Step*: the cutoff is optimizer step K. *Least-Time*: the cutoff is the smallest cumulative
wall time any method of the same seed needed for K steps.
"""

from pydantic import Field

from services.contracts.base import Contract, FiniteFloat, NonNegInt, Probability


class WindowScore(Contract):
    """Mean and population std of the evaluation points in one window (None: no point in the window)."""

    mean: Probability | None
    std: FiniteFloat | None = Field(ge=0.0)
    steps: list[NonNegInt] = Field(description="Optimizer steps of the evaluation points averaged.")


class TaskTypeScore(Contract):
    """One task type's Avg@n under both protocols (the same evaluation points as overall)."""

    same_step: WindowScore
    least_time: WindowScore


class TimeSplit(Contract):
    """Wall time summed over steps 1..K, by phase of the step (seconds)."""

    rollout_s: FiniteFloat = Field(ge=0.0)
    teacher_s: FiniteFloat = Field(ge=0.0)
    learner_s: FiniteFloat = Field(ge=0.0)
    other_s: FiniteFloat = Field(ge=0.0)


class RunScore(Contract):
    """One (method, seed) run."""

    seed: NonNegInt
    run_dir: str
    wall_time_s: FiniteFloat = Field(ge=0.0, description="Cumulative step wall time through step K.")
    time_split: TimeSplit
    mean_h_roll: FiniteFloat = Field(ge=0.0, description="Mean rollout depth cap over steps 1..K.")
    least_time_cutoff_s: FiniteFloat = Field(ge=0.0, description="This seed's Least-Time cutoff.")
    speedup_vs_vanilla: FiniteFloat | None = Field(
        description="Vanilla's wall time (same seed) / this run's; None without a vanilla run."
    )
    same_step: WindowScore
    least_time: WindowScore
    per_task_type: dict[str, TaskTypeScore]
    per_env: dict[str, TaskTypeScore] = Field(
        default_factory=dict,
        description="Each task source's Avg@n (a multi-environment run: the overall score is their mean).",
    )


class TaskTypeSummary(Contract):
    """One task type over seeds: means of the per-seed window means and of the per-seed window stds."""

    same_step_acc: Probability | None
    same_step_std: FiniteFloat | None
    least_time_acc: Probability | None
    least_time_std: FiniteFloat | None


class MethodSummary(Contract):
    """One method over its seeds.

    ``*_acc``: mean over seeds of each run's window mean; ``*_std``: mean over seeds of each run's
    window std (the paper's ± term); ``*_seed_std``: sample std over seeds of the window means (None
    with one seed). ``wall_time_s`` is the seed mean, ``speedup_vs_vanilla`` the ratio of the seed means.
    """

    method: str
    seeds: list[NonNegInt]
    same_step_acc: Probability | None
    same_step_std: FiniteFloat | None
    same_step_seed_std: FiniteFloat | None
    least_time_acc: Probability | None
    least_time_std: FiniteFloat | None
    least_time_seed_std: FiniteFloat | None
    wall_time_s: FiniteFloat = Field(ge=0.0)
    wall_time_seed_std: FiniteFloat | None
    speedup_vs_vanilla: FiniteFloat | None
    per_task_type: dict[str, TaskTypeSummary]
    per_env: dict[str, TaskTypeSummary] = Field(
        default_factory=dict, description="Each task source's Avg@n over the seeds (multi-environment runs)."
    )
    runs: list[RunScore]


class ComparisonSummary(Contract):
    """``DIR/summary.json``: every method of one comparison, keyed by method in the order given."""

    steps: int = Field(ge=1, description="K: optimizer steps of every run (the Same-Step cutoff).")
    window: int = Field(ge=1, description="Evaluation points averaged per protocol.")
    baseline: str = Field(description="Method the speedups are relative to.")
    seeds: list[NonNegInt]
    least_time_cutoff_s: dict[str, FiniteFloat] = Field(
        description="Per seed (key: the seed as text): min over methods of the wall time for K steps."
    )
    config: str | None = Field(description="Config file the runs were started from, if any.")
    methods: dict[str, MethodSummary]
