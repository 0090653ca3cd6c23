"""Evaluation of a checkpoint on a split (pure): which episodes to play, and their scores.

Tasks: ``episodes`` games, task types taken round-robin (so every type appears), game seeds
derived from the eval seed, and ``n`` samples of each game. Scores (per task type and overall):

* ``success_rate``: episodes won / episodes played (an episode that failed to play counts as lost,
  and is reported in ``failed_episodes``);
* ``avg_at_n`` (the paper's Avg@n): mean over games of the mean success of their n samples;
* ``pass_at_n``: share of games won by at least one sample;
* ``mean_reward``: mean episode reward (webshop's dense purchase score; a failed episode counts 0).
"""

from collections.abc import Sequence
from dataclasses import dataclass

from services.contracts.rollout import EpisodeTask, EvalReport, RolloutResult, TaskTypeScore
from services.contracts.trajectory import Trajectory
from services.errors import InputError

# Eval game seeds with --seed s are s * stride + k: k-th game of each type (game index = seed % pool).
GAME_SEED_STRIDE = 100_003

# Column names of the paper's ALFWorld category table.
PAPER_LABELS: dict[str, str] = {
    "pick_two_obj_and_place": "2Obj",
    "pick_heat_then_place": "Heat",
    "pick_cool_then_place": "Cool",
    "pick_clean_then_place": "Clean",
    "pick_and_place": "Place",
    "look_at_obj_in_light": "Look",
}
UNKNOWN_TYPE = "unknown"


def eval_tasks(
    env: str, split: str, episodes: int, n: int, seed: int, task_types: Sequence[str]
) -> list[EpisodeTask]:
    """``episodes`` games x ``n`` samples, the samples of one game next to each other."""
    if episodes < 1 or n < 1 or seed < 0:
        raise InputError(f"need episodes >= 1, n >= 1 and seed >= 0; got {episodes}, {n}, {seed}")
    types: Sequence[str | None] = list(task_types) or [None]
    tasks = []
    for i in range(episodes):
        game_seed = seed * GAME_SEED_STRIDE + i // len(types)
        for sample in range(n):
            tasks.append(
                EpisodeTask(
                    env=env, split=split, seed=game_seed, task_type=types[i % len(types)], sample_index=sample
                )
            )
    return tasks


@dataclass(frozen=True)
class EpisodeScore:
    """One played (or failed) episode, reduced to what the scores need."""

    game: tuple[str, str, int, str | None]
    task_type: str
    played: bool
    success: bool
    turns: int
    truncated: bool
    reward: float = 0.0


def episode_scores(tasks: Sequence[EpisodeTask], result: RolloutResult) -> list[EpisodeScore]:
    """Every task's outcome in ``result`` (tasks without a trajectory failed), in task order."""
    if result.task_indices is None:
        raise InputError("the rollout result does not say which task each trajectory plays")
    played: dict[int, Trajectory] = dict(zip(result.task_indices, result.trajectories, strict=True))
    if len(played) + len(result.failures) != len(tasks):
        raise InputError(
            f"{len(played)} trajectories + {len(result.failures)} failures for {len(tasks)} tasks"
        )
    scores = []
    for i, task in enumerate(tasks):
        trajectory = played.get(i)
        task_type = task.task_type or (trajectory.task_type if trajectory else None) or UNKNOWN_TYPE
        game = (task.env, task.split, task.seed, task.task_type)
        if trajectory is None:
            scores.append(EpisodeScore(game, task_type, False, False, 0, False))
        else:
            turns = len(trajectory.turns)
            scores.append(
                EpisodeScore(
                    game, task_type, True, trajectory.success, turns, trajectory.truncated, trajectory.reward
                )
            )
    return scores


def score(episodes: Sequence[EpisodeScore]) -> TaskTypeScore:
    """Success rate, Avg@n and pass@n of a group of episodes."""
    games: dict[tuple[str, str, int, str | None], list[bool]] = {}
    for episode in episodes:
        games.setdefault(episode.game, []).append(episode.success)
    played = [e for e in episodes if e.played]
    successes = sum(e.success for e in episodes)
    return TaskTypeScore(
        tasks=len(games),
        episodes=len(episodes),
        successes=successes,
        failed_episodes=len(episodes) - len(played),
        success_rate=successes / len(episodes) if episodes else 0.0,
        avg_at_n=sum(sum(s) / len(s) for s in games.values()) / len(games) if games else 0.0,
        pass_at_n=sum(any(s) for s in games.values()) / len(games) if games else 0.0,
        mean_turns=sum(e.turns for e in played) / len(played) if played else 0.0,
        mean_reward=sum(e.reward for e in episodes) / len(episodes) if episodes else 0.0,
    )


def eval_report(
    tasks: Sequence[EpisodeTask],
    result: RolloutResult,
    *,
    model: str,
    n: int,
    temperature: float,
    max_turns: int,
    seed: int,
    task_types: Sequence[str] = (),
) -> EvalReport:
    """The report of one evaluation; ``per_task_type`` follows ``task_types``' order, then any others."""
    if not tasks:
        raise InputError("an evaluation needs at least one task")
    episodes = episode_scores(tasks, result)
    order = list(dict.fromkeys([*task_types, *(e.task_type for e in episodes)]))
    per_type = {t: score([e for e in episodes if e.task_type == t]) for t in order}
    overall = score(episodes)
    return EvalReport(
        model=model,
        env=tasks[0].env,
        split=tasks[0].split,
        n=n,
        temperature=temperature,
        max_turns=max_turns,
        seed=seed,
        weights_version=result.weights_version,
        success_rate=overall.success_rate,
        avg_at_n=overall.avg_at_n,
        pass_at_n=overall.pass_at_n,
        mean_reward=overall.mean_reward,
        episodes=overall.episodes,
        failed_episodes=overall.failed_episodes,
        truncated_episodes=sum(e.truncated for e in episodes),
        per_task_type={t: s for t, s in per_type.items() if s.episodes},
        overall=overall,
        generated_tokens=result.generated_tokens,
        wall_s=result.wall_s,
    )
