"""Eval task lists and scores: success rate, Avg@n, pass@n, per task type, failures counted as lost."""

from collections import Counter

import pytest
from played_episodes import result_of, trajectory

from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES
from services.contracts.rollout import EpisodeFailure, RolloutResult
from services.errors import InputError
from services.rollout_worker.evaluation import GAME_SEED_STRIDE, eval_report, eval_tasks


def test_eval_tasks_cover_every_type_with_distinct_games_and_n_samples_each():
    tasks = eval_tasks("alfworld", "valid_unseen", 30, 2, 0, HOUSEHOLD_TASK_TYPES)
    assert len(tasks) == 60
    assert Counter(t.task_type for t in tasks) == {t: 10 for t in HOUSEHOLD_TASK_TYPES}
    games = {(t.seed, t.task_type) for t in tasks}
    assert len(games) == 30
    assert [t.sample_index for t in tasks[:4]] == [0, 1, 0, 1]
    assert tasks[0].seed == tasks[1].seed == 0 and tasks[-1].seed == 4
    shifted = eval_tasks("alfworld", "valid_unseen", 6, 1, 2, HOUSEHOLD_TASK_TYPES)
    assert {t.seed for t in shifted} == {2 * GAME_SEED_STRIDE}
    untyped = eval_tasks("textworld", "train", 3, 1, 0, [])
    assert [(t.seed, t.task_type) for t in untyped] == [(0, None), (1, None), (2, None)]
    with pytest.raises(InputError):
        eval_tasks("alfworld", "train", 0, 1, 0, HOUSEHOLD_TASK_TYPES)


def test_scores_per_task_type_and_overall():
    types = ["pick_and_place", "look_at_obj_in_light"]
    tasks = eval_tasks("alfworld", "valid_unseen", 4, 2, 0, types)  # games: place 0, look 0, place 1, look 1
    # place game 0: 2/2 wins; look game 0: 1/2; place game 1: 0/2; look game 1: one lost, one failed to play
    wins = {0: True, 1: True, 2: True}
    report = eval_report(
        tasks,
        result_of(tasks, wins, failed={7}),
        model="m",
        n=2,
        temperature=0.85,
        max_turns=5,
        seed=0,
        task_types=types,
    )
    place, look = report.per_task_type["pick_and_place"], report.per_task_type["look_at_obj_in_light"]
    assert (place.tasks, place.episodes, place.successes) == (2, 4, 2)
    assert place.avg_at_n == pytest.approx(0.5) and place.pass_at_n == pytest.approx(0.5)
    assert (look.successes, look.failed_episodes) == (1, 1)
    assert look.avg_at_n == pytest.approx(0.25) and look.pass_at_n == pytest.approx(0.5)
    assert look.mean_turns == pytest.approx(2.0)
    assert report.success_rate == pytest.approx(3 / 8) and report.avg_at_n == pytest.approx(3 / 8)
    assert report.pass_at_n == pytest.approx(2 / 4)
    assert (report.episodes, report.failed_episodes, report.truncated_episodes) == (8, 1, 4)
    assert list(report.per_task_type) == types


def test_a_result_that_misses_tasks_is_refused():
    tasks = eval_tasks("alfworld", "valid_unseen", 2, 1, 0, ["pick_and_place"])
    partial = result_of(tasks[:1], {}, failed=set())
    with pytest.raises(InputError, match="1 trajectories \\+ 0 failures for 2 tasks"):
        eval_report(tasks, partial, model="m", n=1, temperature=1.0, max_turns=5, seed=0)


def test_dense_rewards_give_a_mean_reward_per_category_and_success_only_at_one():
    tasks = eval_tasks("webshop", "valid_unseen", 4, 1, 0, [])  # untyped: categories come from the games
    categories = ["food", "fashion", "food", "fashion"]
    rewards = [1.0, 0.5, 0.25, 0.0]
    played = [
        trajectory(t, success=r == 1.0).model_copy(update={"task_type": c, "reward": r})
        for t, c, r in zip(tasks[:3], categories, rewards, strict=False)
    ]
    result = RolloutResult(
        trajectories=played,
        failures=[EpisodeFailure(task=tasks[3], error="lost", worker="w")],
        worker="rollout-pool",
        weights_version=0,
        generated_tokens=6,
        wall_s=1.0,
        task_indices=[0, 1, 2],
    )
    report = eval_report(tasks, result, model="m", n=1, temperature=1.0, max_turns=30, seed=0)
    food, lost = report.per_task_type["food"], report.per_task_type["unknown"]
    assert food.mean_reward == pytest.approx(0.625) and food.success_rate == pytest.approx(0.5)
    assert report.per_task_type["fashion"].mean_reward == pytest.approx(0.5)
    assert lost.failed_episodes == 1 and lost.mean_reward == 0.0  # a failed episode scores 0
    assert report.mean_reward == pytest.approx(1.75 / 4) and report.success_rate == pytest.approx(1 / 4)
