"""Which tasks a step plays: seeded, task types round-robin, sources by their shares."""

import pytest

from services.orchestrator.tasks import mixed_step_tasks, source_counts, step_tasks
from services.settings import load_settings


def test_step_tasks_are_seeded_by_run_step_and_split():
    tasks = step_tasks("alfworld", "train", 6, 2, 3, 0, ["pick", "clean"])
    assert len(tasks) == 6 and [t.sample_index for t in tasks] == [0, 1, 0, 1, 0, 1]
    assert [t.task_type for t in tasks[::2]] == ["pick", "clean", "pick"]
    assert tasks == step_tasks("alfworld", "train", 6, 2, 3, 0, ["pick", "clean"])
    assert [t.seed for t in tasks] != [t.seed for t in step_tasks("alfworld", "train", 6, 2, 4, 0, [])]


@pytest.mark.parametrize(
    ("shares", "batch", "counts"),
    [
        ([1.0], 8, [8]),
        ([0.5, 0.3, 0.2], 10, [5, 3, 2]),
        ([0.5, 0.3, 0.2], 8, [4, 2, 2]),
        ([1 / 3] * 3, 4, [2, 1, 1]),
    ],
)
def test_the_batch_is_split_by_the_shares_largest_remainders_first(shares, batch, counts):
    assert source_counts(shares, batch) == counts and sum(counts) == batch


def test_one_source_plays_exactly_todays_tasks_and_several_play_their_shares():
    [only] = load_settings(None, {"rollout": {"env": "search"}}).task_sources()
    assert mixed_step_tasks([only], 8, 2, 5, 7) == step_tasks("search", "train", 8, 2, 5, 7, [])
    sources = load_settings(
        None,
        {
            "sources": [
                {"env": "alfworld", "share": 0.5, "teacher": "a", "task_types": ["pick"]},
                {"env": "search", "share": 0.25, "teacher": "b"},
                {"env": "webshop", "share": 0.25, "teacher": "c"},
            ]
        },
    ).task_sources()
    tasks = mixed_step_tasks(sources, 8, 1, 5, 7)
    assert [t.env for t in tasks] == ["alfworld"] * 4 + ["search"] * 2 + ["webshop"] * 2
    assert {t.task_type for t in tasks[:4]} == {"pick"}
