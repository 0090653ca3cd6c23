"""A step over several task sources: one part per source, weights blended per part and scaled by
the shares, the turn statistics split back per source; one source is exactly the single-source step."""

import numpy as np
import pytest
from step_fakes import trajectory

from services.contracts.controller import StepPlan
from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.orchestrator.source_mix import SourceBatch, mixed_learner_batch, source_turn_stats
from services.orchestrator.step_data import TeacherScores, learner_batch
from services.settings import load_settings

SOURCES = load_settings(
    None,
    {
        "sources": [
            {"env": "alfworld", "share": 0.75, "teacher": "teacher-novel", "blend": {"min_floor": 1}},
            {"env": "search", "share": 0.25, "teacher": "teacher-search", "blend": {"min_floor": 1}},
        ]
    },
).task_sources()


def scores(n, k=2):
    return TeacherScores(
        np.arange(n * k, dtype=np.int64).reshape(n, k), np.full((n, k), -1.5, np.float32), None
    )


def plan(alpha, probe=False, h_roll=6):
    return StepPlan(step=4, probe=probe, h_roll=h_roll, h_hat=3, alpha=alpha, weights_version=3)


def test_one_source_is_exactly_the_single_source_batch():
    [only] = load_settings(None, {"blend": {"min_floor": 1, "min_frac": 0.0}}).task_sources()
    a, c = trajectory("a", [(2, 4), (6, 7)]), trajectory("c", [(1, 2)])
    part = SourceBatch(only, plan(0.5, probe=True), [a, c], [scores(3), scores(1)])
    assert mixed_learner_batch(4, [part]) == learner_batch(
        plan(0.5, probe=True), [a, c], [scores(3), scores(1)], 1, 0.0
    )


def test_each_part_carries_its_share_with_its_own_alpha():
    household = SourceBatch(
        SOURCES[0],
        plan(1.0, probe=True, h_roll=8),
        [trajectory("a", [(2, 4), (6, 7)]), trajectory("b", [(1, 2)])],
        [scores(3), scores(1)],
    )
    search = SourceBatch(SOURCES[1], plan(0.0, h_roll=3), [trajectory("s", [(3, 5)])], [scores(2)])
    batch = mixed_learner_batch(4, [household, search])
    a, b, s = batch.samples
    assert sum(a.token_weights) + sum(b.token_weights) == pytest.approx(0.75)
    assert s.token_weights == pytest.approx([0.125, 0.125])  # trajectory level within search, times 0.25
    # household at alpha 1: two reliable turns (n_min 1) of mass 1/2 each, scaled by 0.75
    assert a.token_weights == pytest.approx([0.75 * 0.5 * 0.5 / 2] * 2 + [0.75 * 0.5])
    assert (batch.probe, batch.h_roll, batch.alpha) == (True, 8, pytest.approx(0.75))


def test_the_turn_statistics_split_back_per_source():
    household = SourceBatch(
        SOURCES[0],
        plan(1.0, probe=True),
        [trajectory("a", [(2, 4)]), trajectory("b", [(1, 2)])],
        [scores(2), scores(1)],
    )
    search = SourceBatch(SOURCES[1], plan(0.0, h_roll=3), [trajectory("s", [(3, 5)])], [scores(2)])
    stats = [
        TrajectoryTurnStats(turn_tokens=[n], turn_kl_sum=[0.1 * n], success=False, truncated=False)
        for n in (2, 1, 2)
    ]
    record = TurnStatsRecord(step=4, probe=True, alpha=0.75, h_roll=6, trajectories=stats)
    first, second = source_turn_stats(record, [household, search])
    assert (first.env, first.probe, first.alpha, first.trajectories) == ("alfworld", True, 1.0, stats[:2])
    assert (second.env, second.probe, second.h_roll, second.trajectories) == ("search", False, 3, stats[2:])
    assert "env" not in record.model_dump() and second.model_dump()["env"] == "search"
