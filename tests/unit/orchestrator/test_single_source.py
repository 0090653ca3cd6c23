"""One source of a multi-environment run as a run of its own (the baseline of bench/multi_env.py)."""

from pathlib import Path

import pytest

from services.errors import InputError
from services.orchestrator.single_source import single_source_overrides
from services.orchestrator.tasks import mixed_step_tasks
from services.settings import load_settings

MULTI_ENV = Path(__file__).parents[3] / "configs" / "multi_env.toml"


@pytest.mark.parametrize(("env", "batch"), [("alfworld", 6), ("search", 3), ("webshop", 3)])
def test_a_source_alone_plays_its_own_tasks_with_its_own_teacher_and_controller(env, batch):
    multi = load_settings(MULTI_ENV)
    single = load_settings(MULTI_ENV, single_source_overrides(multi, env))
    assert single.sources == [] and single.optim.batch == batch
    assert single.optim.mini_batches == min(batch, multi.optim.mini_batches)
    assert single.optim.steps == multi.optim.steps and single.run.seed == multi.run.seed
    [alone] = single.task_sources()
    assert alone == multi.task_source(env).model_copy(update={"share": 1.0})
    assert single.for_controller() == multi.for_controller(env).model_copy(update={"env": None})
    r = multi.rollout
    for step in (1, 2, 7):
        mixed = mixed_step_tasks(multi.task_sources(), multi.optim.batch, r.n, step, multi.run.seed)
        # the worker restates the task as its [rollout] task_reminder says: the source's own
        mine = [t.model_copy(update={"task_reminder": None}) for t in mixed if t.env == env]
        assert mixed_step_tasks([alone], batch, r.n, step, single.run.seed) == mine
    assert single.for_rollout_worker().task_reminder == alone.task_reminder == (env == "alfworld")


def test_an_env_that_is_no_source_or_gets_no_trajectory_is_refused():
    multi = load_settings(MULTI_ENV)
    with pytest.raises(InputError, match="no task source plays env 'gsm8k'"):
        single_source_overrides(multi, "gsm8k")
    small = load_settings(MULTI_ENV, {"optim": {"batch": 2, "mini_batches": 2}})
    with pytest.raises(ValueError, match="source 'webshop' gets no trajectory of a batch of 2"):
        single_source_overrides(small, "webshop")
