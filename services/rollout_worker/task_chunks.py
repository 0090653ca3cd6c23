"""How the pool cuts a task list into worker calls and puts the answers back together (pure)."""

import itertools
import math
from collections.abc import Mapping, Sequence

from services.contracts.rollout import GATEWAY_FAILURES, EpisodeFailure, EpisodeTask, RolloutResult
from services.contracts.trajectory import Trajectory
from services.errors import InputError
from services.ray_names import ROLLOUT_POOL as POOL_NAME


def split_even(n_tasks: int, parts: int) -> list[range]:
    """Contiguous ranges covering ``range(n_tasks)``, ``min(parts, n_tasks)`` of them, sizes differing by <= 1."""
    if n_tasks < 0 or parts < 1:
        raise InputError(f"cannot split {n_tasks} tasks into {parts} parts")
    parts = min(parts, n_tasks)
    bounds = [n_tasks * i // parts for i in range(parts + 1)] if parts else [0]
    return [range(lo, hi) for lo, hi in itertools.pairwise(bounds)]


def chunk_count(n_tasks: int, workers: int, chunk_size: int | None) -> int:
    """One chunk per worker (an even split), or enough chunks of at most ``chunk_size`` tasks."""
    if chunk_size is None:
        return max(1, workers)
    if chunk_size < 1:
        raise InputError(f"chunk_size must be >= 1, got {chunk_size}")
    return max(1, math.ceil(n_tasks / chunk_size))


def depth_chunks(depths: Sequence[int], workers: int, chunk_size: int | None) -> list[tuple[range, int]]:
    """Worker calls for tasks with a rollout depth each: every run of consecutive tasks with one depth
    (a task source's) is cut as ``split_even``/``chunk_count`` cut a whole list, so a call plays one
    depth; one depth for all tasks gives exactly the chunks of the whole list."""
    pieces: list[tuple[range, int]] = []
    start = 0
    for depth, run in itertools.groupby(depths):
        n = len(list(run))
        for part in split_even(n, chunk_count(n, workers, chunk_size)):
            pieces.append((range(start + part.start, start + part.stop), depth))
        start += n
    return pieces


def merge_results(
    tasks: Sequence[EpisodeTask],
    chunks: Sequence[range],
    results: Mapping[int, RolloutResult],
    failed: Mapping[int, Sequence[EpisodeFailure]],
    weights_version: int,
    wall_s: float,
) -> RolloutResult:
    """One result over all tasks: trajectories in task order, every task either played or failed.

    ``results[c]`` answers chunk ``c`` (its ``task_indices`` relative to the chunk); ``failed[c]``
    holds the failures of a chunk no worker could play. A task missing from both is a bug.
    """
    by_task: dict[int, Trajectory] = {}
    failures: list[EpisodeFailure] = []
    accounted = 0
    for c, chunk in enumerate(chunks):
        if c in results:
            result = results[c]
            if result.task_indices is None:
                raise InputError(f"the result of chunk {c} does not say which task each trajectory plays")
            for local, trajectory in zip(result.task_indices, result.trajectories, strict=True):
                by_task[chunk[local]] = trajectory
            failures.extend(result.failures)
            accounted += len(result.trajectories) + len(result.failures)
        else:
            failures.extend(failed.get(c, ()))
            accounted += len(failed.get(c, ()))
    if accounted != len(tasks):
        raise InputError(f"{accounted} outcomes for {len(tasks)} tasks: some episodes went missing")
    order = sorted(by_task)
    trajectories = [by_task[i] for i in order]
    return RolloutResult(
        trajectories=trajectories,
        failures=failures,
        worker=POOL_NAME,
        weights_version=weights_version,
        generated_tokens=sum(len(t.sampler_logprobs) for t in trajectories),
        wall_s=wall_s,
        task_indices=order,
    )


def lost_episodes(result: RolloutResult, gateway_switched: bool) -> list[EpisodeFailure]:
    """The failures for which a chunk's result is played again whole (none: it is kept, failures
    and all): every failure when the env gateway was switched while it played (episodes on the old
    gateway are gone), else those the gateway lost (``env_lost``: an env worker process died) or
    could not reach (``env_unreachable``: the gateway process died). The environment's own failures
    (a game that raised on an action) are kept as failures."""
    if gateway_switched:
        return list(result.failures)
    return [f for f in result.failures if f.reason in GATEWAY_FAILURES]
