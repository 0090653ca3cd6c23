"""`turnopd train` on another backend through config alone (`[rollout] env`): the same pipeline, two
steps, the env's own reward and turn budget in the run directory. The shop here; the search env
trains in tests/integration/test_multi_env.py (its source's evaluation, task types and episodes are
checked there), so one single-env run of a non-household env covers the `[rollout] env` path."""

from pathlib import Path

import pytest
from rollout_fixtures import smoke_config, zoo_cache_dir

from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.contracts.records import TurnStatsRecord
from services.envs.webshop.vocabulary import CATEGORIES
from services.orchestrator.pipeline import train
from services.run_dir import RunDir
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("env", ["webshop"])
def test_train_runs_on_another_env_through_config_alone(ray_session, tmp_path: Path, env: str):
    assert zoo_cache_dir().is_dir()
    config = smoke_config(tmp_path)
    text = config.read_text().replace("[rollout]\n", f'[rollout]\nenv = "{env}"\n')
    text = text.replace("[optim]\nbatch = 4\nsteps = 3", "[optim]\nbatch = 4\nsteps = 2")
    text = text.replace("[eval]\ninterval = 3", "[eval]\ninterval = 2")
    config.write_text(text)
    settings = load_settings(config)
    assert settings.rollout.env == env and settings.optim.steps == 2
    run = RunDir(settings.run.run_dir)
    run.create(settings.model_dump_json())
    steps: list[StepMetrics] = []
    evals: list[EvalRecord] = []
    assert train(settings, run, steps.append, evals.append) == 2

    metrics = read_jsonl(run.path("metrics.jsonl"), StepMetrics)
    assert [m.step for m in metrics] == [1, 2] and [m.weights_version for m in metrics] == [1, 2]
    assert all(m.trajectories == 4 and m.failed_episodes == 0 for m in metrics)
    assert all(m.loss > 0 and m.tokens > 0 for m in metrics)
    assert all(1 <= m.h_roll <= settings.rollout.max_turns for m in metrics)
    turn_stats = read_jsonl(run.path("turn_stats.jsonl"), TurnStatsRecord)
    assert [r.step for r in turn_stats] == [1, 2]
    [record] = read_jsonl(run.path("eval.jsonl"), EvalRecord)
    assert record.step == 2 and record.split == "valid_unseen" and record.episodes == 2
    expected = {"search": {"single_hop", "two_hop", "three_hop"}, "webshop": set(CATEGORIES)}[env]
    assert set(record.per_task_type) <= expected and record.per_task_type
