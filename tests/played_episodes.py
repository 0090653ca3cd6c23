"""Played (or failed) episodes of given tasks, as a rollout pool returns them: the evaluation tests'
input."""

from services.contracts.rollout import EpisodeFailure, EpisodeTask, RolloutResult
from services.contracts.trajectory import Trajectory, TurnRecord


def trajectory(task: EpisodeTask, success: bool, turns: int = 2, truncated: bool = False) -> Trajectory:
    records = [
        TurnRecord(
            index=i, response_start=2 * i, response_end=2 * i + 1, action=None, accepted=False, observation=""
        )
        for i in range(turns)
    ]
    return Trajectory(
        episode_id=f"ep-{task.seed}-{task.sample_index}",
        env=task.env,
        split=task.split,
        task_type=task.task_type,
        token_ids=list(range(2 * turns)),
        turns=records,
        sampler_logprobs=[-1.0] * turns,
        reward=1.0 if success else 0.0,
        success=success,
        truncated=truncated,
        weights_version=0,
    )


def result_of(tasks: list[EpisodeTask], wins: dict[int, bool], failed: set[int]) -> RolloutResult:
    played = [i for i in range(len(tasks)) if i not in failed]
    trajectories = [
        trajectory(tasks[i], wins.get(i, False), truncated=not wins.get(i, False)) for i in played
    ]
    return RolloutResult(
        trajectories=trajectories,
        failures=[EpisodeFailure(task=tasks[i], error="lost", worker="w") for i in sorted(failed)],
        worker="rollout-pool",
        weights_version=0,
        generated_tokens=sum(len(t.sampler_logprobs) for t in trajectories),
        wall_s=1.0,
        task_indices=played,
    )
