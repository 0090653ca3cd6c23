"""The evaluator's record: episodes that could not be played are counted, named and warned of."""

import logging
from pathlib import Path

import pytest
from played_episodes import result_of

from services.contracts.rollout import EpisodeTask, RolloutResult
from services.orchestrator.evaluation import EvalPlan, evaluate
from services.settings import load_settings

MULTI_ENV = Path(__file__).parents[3] / "configs" / "multi_env.toml"


class PlayedPool:
    """A pool that wins the first task and cannot play those in ``failed`` (the glue under test is
    the evaluator's; the pool's own play has its integration tests)."""

    def __init__(self, failed: set[int]) -> None:
        self.failed = failed

    def play(self, tasks: list[EpisodeTask], *args: object, **kwargs: object) -> RolloutResult:
        return result_of(tasks, {0: True}, self.failed)


def test_unplayed_episodes_are_recorded_and_warned_of(caplog: pytest.LogCaptureFixture) -> None:
    settings = load_settings(None, {"eval": {"episodes": 6, "val_n": 1}})
    plan = EvalPlan.of(settings, tuple(settings.task_sources()))
    [whole] = evaluate(PlayedPool(set()), plan, 0, 0, 0.0)  # type: ignore[arg-type]
    assert whole.episodes == 6 and whole.success_rate == 1 / 6 and whole.failed_episodes is None
    assert "failed_episodes" not in whole.model_dump_json()
    with caplog.at_level(logging.WARNING, logger="services.orchestrator.evaluation"):
        [lossy] = evaluate(PlayedPool({2, 4}), plan, 4, 1, 12.5)  # type: ignore[arg-type]
    assert lossy.failed_episodes == 2 and lossy.episodes == 6 and lossy.success_rate == 1 / 6
    assert lossy.step == 4 and lossy.cumulative_s == 12.5
    [warning] = caplog.messages
    assert "evaluation after step 4: 2 of 6 episodes could not be played (2 play)" in warning
    assert "e.g. lost" in warning


def test_a_multi_environment_warning_names_its_source(caplog: pytest.LogCaptureFixture) -> None:
    settings = load_settings(MULTI_ENV, {"eval": {"episodes": 3, "val_n": 1}})
    plan = EvalPlan.of(settings, tuple(settings.task_sources()))
    with caplog.at_level(logging.WARNING, logger="services.orchestrator.evaluation"):
        records = evaluate(PlayedPool({1}), plan, 2, 1, 1.0)  # type: ignore[arg-type]
    assert [(r.env, r.failed_episodes) for r in records] == [(s.env, 1) for s in plan.sources]
    assert [m.split(":")[0] for m in caplog.messages] == [
        f"evaluation after step 2 ({s.env})" for s in plan.sources
    ]
