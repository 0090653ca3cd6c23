"""Cutting tasks into worker calls and merging the answers back in task order."""

import pytest

from services.contracts.rollout import EpisodeFailure, EpisodeTask, RolloutResult
from services.contracts.trajectory import Trajectory
from services.errors import InputError
from services.rollout_worker.task_chunks import (
    chunk_count,
    depth_chunks,
    lost_episodes,
    merge_results,
    split_even,
)


def test_even_split_covers_every_task_once():
    assert split_even(10, 3) == [range(0, 3), range(3, 6), range(6, 10)]
    assert split_even(2, 4) == [range(0, 1), range(1, 2)]
    assert split_even(0, 2) == []
    assert chunk_count(10, 2, None) == 2 and chunk_count(10, 2, 4) == 3
    with pytest.raises(InputError):
        split_even(3, 0)


def task(seed: int) -> EpisodeTask:
    return EpisodeTask(env="alfworld", split="train", seed=seed)


def trajectory(seed: int) -> Trajectory:
    return Trajectory(
        episode_id=f"ep-{seed}",
        env="alfworld",
        split="train",
        token_ids=[1],
        turns=[],
        sampler_logprobs=[],
        reward=0.0,
        success=False,
        truncated=True,
        weights_version=1,
    )


def chunk_result(seeds: list[int], played: list[int], lost: list[int]) -> RolloutResult:
    return RolloutResult(
        trajectories=[trajectory(seeds[i]) for i in played],
        failures=[EpisodeFailure(task=task(seeds[i]), error="lost", worker="w") for i in lost],
        worker="w",
        weights_version=1,
        generated_tokens=0,
        wall_s=0.1,
        task_indices=played,
    )


def test_merge_puts_trajectories_in_task_order_and_keeps_every_failure():
    tasks = [task(s) for s in range(7)]
    chunks = split_even(7, 3)  # [0,1] [2,3] [4,5,6]
    results = {2: chunk_result([4, 5, 6], [0, 2], [1]), 0: chunk_result([0, 1], [1, 0], [])}
    dead = {1: [EpisodeFailure(task=tasks[i], error="worker gone", worker="rollout-pool") for i in (2, 3)]}
    merged = merge_results(tasks, chunks, results, dead, 1, 2.5)
    assert [t.episode_id for t in merged.trajectories] == ["ep-0", "ep-1", "ep-4", "ep-6"]
    assert merged.task_indices == [0, 1, 4, 6]
    assert sorted(f.task.seed for f in merged.failures) == [2, 3, 5]
    assert merged.worker == "rollout-pool" and merged.wall_s == 2.5


def test_merge_refuses_to_lose_episodes():
    tasks = [task(s) for s in range(4)]
    with pytest.raises(InputError, match="went missing"):
        merge_results(tasks, split_even(4, 2), {0: chunk_result([0, 1], [0, 1], [])}, {}, 1, 0.0)


def test_depth_chunks_cut_each_sources_run_like_a_whole_list():
    assert depth_chunks([5] * 7, 3, None) == [(r, 5) for r in split_even(7, 3)]
    pieces = depth_chunks([8] * 4 + [3] * 2 + [30] * 3, 2, None)
    assert pieces == [
        (range(0, 2), 8),
        (range(2, 4), 8),
        (range(4, 5), 3),
        (range(5, 6), 3),
        (range(6, 7), 30),
        (range(7, 9), 30),
    ]
    assert depth_chunks([8] * 4 + [3] * 2, 2, 3) == [(range(0, 2), 8), (range(2, 4), 8), (range(4, 6), 3)]


def test_a_chunk_is_played_again_for_episodes_the_gateway_lost_not_for_the_games_own_failures():
    crashed = EpisodeFailure(task=task(1), error="step at turn 2: EngineError: the game raised", worker="w")
    lost = EpisodeFailure(
        task=task(2), error="step at turn 1: EpisodeLostError", worker="w", reason="env_lost"
    )
    result = chunk_result([0, 1, 2], played=[0], lost=[])
    game_failed = result.model_copy(update={"failures": [crashed]})
    worker_died = result.model_copy(update={"failures": [crashed, lost]})
    assert lost_episodes(result, gateway_switched=False) == []
    assert lost_episodes(game_failed, gateway_switched=False) == []  # kept, with its reason
    assert lost_episodes(worker_died, gateway_switched=False) == [lost]
    silent = lost.model_copy(update={"error": "create: ConnectError", "reason": "env_unreachable"})
    gateway_died = result.model_copy(update={"failures": [crashed, silent]})
    assert lost_episodes(gateway_died, gateway_switched=False) == [silent]  # played again, once it is back
    # across a gateway switch every failure may be the old gateway's doing
    assert lost_episodes(game_failed, gateway_switched=True) == [crashed]
    assert lost_episodes(result, gateway_switched=True) == []
