"""What the orchestrator asks of the rollout pool, and what comes back; the eval report of `turnopd eval`."""

from typing import Literal

from pydantic import Field, model_validator

from services.contracts.base import Contract, FiniteFloat, NonNegInt, Probability
from services.contracts.trajectory import Trajectory


class EpisodeTask(Contract):
    """One episode to play: which game (env, split, seed, task type) and which sample of it."""

    # orchestrator -> rollout_worker
    env: str = Field(min_length=1, description="Env backend name, e.g. 'alfworld'.")
    split: str = Field(min_length=1, description="Game pool, e.g. 'train' or 'valid_unseen'.")
    seed: int = Field(ge=0, description="Picks the game deterministically (see EpisodeCreate.seed).")
    task_type: str | None = Field(None, min_length=1, description="Restrict to one task type (None: any).")
    sample_index: NonNegInt = Field(0, description="Which of the n samples of this game (Avg@n).")
    task_reminder: bool | None = Field(
        None,
        description="End every tool observation with the task restated (None: the worker's [rollout] "
        "task_reminder); a multi-environment run sets each source's own.",
    )
    max_tokens: int | None = Field(
        None,
        ge=2,
        description="The longest the episode's trajectory may grow, in tokens up to its last response "
        "token (None: the worker's model's positions); a turn is played only if its prompt and "
        "max_new_tokens fit. A training run sets its teacher's limit here (TeacherContext.max_length).",
    )


class RolloutRequest(Contract):
    """Play every task with the current weights, at most ``h_roll`` turns each."""

    # orchestrator -> rollout_worker
    tasks: list[EpisodeTask] = Field(min_length=1, description="Episodes to play, all concurrently.")
    h_roll: int = Field(
        ge=1, description="Depth cap: an episode still running after h_roll turns is truncated."
    )
    temperature: float = Field(ge=0.0, allow_inf_nan=False, description="Sampling temperature (0: greedy).")
    weights_version: NonNegInt = Field(description="The weights version the worker must hold; else refused.")
    max_new_tokens: int | None = Field(
        None, ge=1, description="Token limit of one response (None: the worker's models.max_new_tokens)."
    )
    seed: int | None = Field(
        None, ge=0, description="Sampling seed (None: derived from the tasks, so a re-run repeats itself)."
    )
    env_gateway_url: str | None = Field(
        None,
        min_length=1,
        description="Env gateway to play against (None: the worker's own); the pool sets it, so a "
        "replaced gateway is used from the next request on.",
    )


# Why an episode counts as failed: it could not be played (env gateway error, worker lost for
# good), the gateway lost it (the pool plays its chunk again, so it reaches a step only after
# max_attempts plays), its trajectory is longer than its teacher scores, or not even its first
# response fit.
FailureReason = Literal["play", "env_lost", "env_unreachable", "worker_lost", "too_long", "no_response"]
# The gateway's failures: a chunk with one is played again whole, with the same seeds.
GATEWAY_FAILURES: frozenset[FailureReason] = frozenset({"env_lost", "env_unreachable"})
# Failures of the system, not of the episode: replayed first; a step with too many stops the run.
INFRA_FAILURES: frozenset[FailureReason] = GATEWAY_FAILURES | {"worker_lost"}


class EpisodeFailure(Contract):
    """An episode that could not be played, or whose trajectory could not be scored or trained on
    (the step drops it); never dropped silently."""

    # rollout_worker -> orchestrator
    task: EpisodeTask
    error: str = Field(min_length=1, description="What went wrong, one line.")
    worker: str = Field(min_length=1, description="The worker that last tried it (or the pool).")
    reason: FailureReason = Field(
        "play",
        description="play: it could not be played (the game failed on an action, say); env_lost: the "
        "env gateway lost the episode (its env worker died, or the gateway was replaced), so the chunk "
        "is played again; env_unreachable: the env gateway did not answer (its process died), so the "
        "chunk is played again once the gateway is back (the watchdog replaces one this run started); "
        "worker_lost: its rollout worker died (or came back restarted) every time it "
        "played the chunk; too_long: its trajectory exceeds what its teacher scores (a teacher restarted "
        "with a lower limit mid-step); no_response: its first prompt left no room for a response within "
        "its limit, so there is nothing to train on.",
    )


class RolloutResult(Contract):
    """Played episodes of one request: trajectories in task order, failed tasks apart."""

    # rollout_worker -> orchestrator
    trajectories: list[Trajectory]
    failures: list[EpisodeFailure]
    worker: str = Field(min_length=1, description="Worker name, or 'rollout-pool' for a merged result.")
    weights_version: NonNegInt = Field(description="The weights version that generated every trajectory.")
    generated_tokens: NonNegInt = Field(description="Sampled response tokens over all trajectories.")
    wall_s: FiniteFloat = Field(ge=0.0, description="Wall-clock seconds of the whole request.")
    task_indices: list[NonNegInt] | None = Field(
        None, description="Index in the request's tasks of each trajectory (None: not recorded)."
    )

    @model_validator(mode="after")
    def _consistent(self) -> "RolloutResult":
        if self.task_indices is not None and len(self.task_indices) != len(self.trajectories):
            raise ValueError(
                f"{len(self.task_indices)} task indices for {len(self.trajectories)} trajectories"
            )
        stale = [t.episode_id for t in self.trajectories if t.weights_version != self.weights_version]
        if stale:
            raise ValueError(f"trajectories {stale[:3]} were not generated by version {self.weights_version}")
        return self


class TaskTypeScore(Contract):
    """Evaluation scores of one task type (or of all tasks together)."""

    # rollout_worker (turnopd eval) -> operator
    tasks: NonNegInt = Field(description="Distinct games evaluated.")
    episodes: NonNegInt = Field(description="Episodes played (tasks x n), failed ones included.")
    successes: NonNegInt = Field(description="Episodes won.")
    failed_episodes: NonNegInt = Field(description="Episodes that could not be played (count as lost).")
    success_rate: Probability = Field(description="successes / episodes.")
    avg_at_n: Probability = Field(description="Mean over games of the mean success of their n samples.")
    pass_at_n: Probability = Field(description="Share of games won by at least one of their n samples.")
    mean_turns: FiniteFloat = Field(ge=0.0, description="Mean turns per played episode.")
    mean_reward: FiniteFloat = Field(
        description="Mean episode reward (failed episodes count 0); webshop: the mean purchase score."
    )


class EvalReport(Contract):
    """`turnopd eval --json`: success rate and Avg@n of a checkpoint on a split, per task type."""

    # rollout_worker (turnopd eval) -> operator
    model: str = Field(min_length=1)
    env: str = Field(min_length=1)
    split: str = Field(min_length=1)
    n: int = Field(ge=1, description="Samples per game.")
    temperature: float = Field(ge=0.0, allow_inf_nan=False)
    max_turns: int = Field(ge=1, description="Turn cap of every episode.")
    seed: NonNegInt
    weights_version: NonNegInt
    success_rate: Probability
    avg_at_n: Probability
    pass_at_n: Probability
    mean_reward: FiniteFloat = Field(description="Mean episode reward; success is a reward of 1.")
    episodes: NonNegInt
    failed_episodes: NonNegInt
    truncated_episodes: NonNegInt = Field(description="Episodes stopped by the turn cap or the context size.")
    per_task_type: dict[str, TaskTypeScore]
    overall: TaskTypeScore
    generated_tokens: NonNegInt
    wall_s: FiniteFloat = Field(ge=0.0)
