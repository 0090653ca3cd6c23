"""A lost learner is restarted by the run (issue 60): the learner's process is SIGKILLed from outside
after step 3 of a synchronous 5-step run with a checkpoint every 2 steps. The run restarts it from
step 2's checkpoint while every other service keeps running, plays steps 3..5 again and finishes:
every step logged once, step 3 played again exactly as before, the controller equal to its replay,
and the recovery in restarts.jsonl."""

import os
import signal
from pathlib import Path

import pytest
from controller_replay import assert_decisions_equal_replay
from ray.util.state import list_actors
from rollout_fixtures import override_sections, short_run, smoke_config

from services.contracts.jsonl import read_jsonl
from services.contracts.operations import RestartResult
from services.contracts.orchestrator import StepMetrics
from services.learner.checkpoint import latest_checkpoint
from services.orchestrator.pipeline import train
from services.run_dir import RESTARTS_FILE, RunDir
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def learner_pid() -> int:
    """The pid of the run's learner (one plain actor: ``SoloLearnerWorker``)."""
    (actor,) = list_actors(filters=[("class_name", "=", "SoloLearnerWorker"), ("state", "=", "ALIVE")])
    return int(actor.pid)


def test_a_killed_learner_is_restarted_from_its_checkpoint_and_the_run_finishes(ray_session, tmp_path: Path):
    config = tmp_path / "recovery.toml"
    overrides = short_run(5, "rollout_workers = 1", checkpoint_every=2)
    config.write_text(override_sections(smoke_config(tmp_path).read_text(), overrides))
    settings = load_settings(config)
    assert (settings.learner.checkpoint_every, settings.learner.max_restarts) == (2, 3)
    assert settings.pipeline.max_staleness == 0
    run = RunDir(settings.run.run_dir)
    run.create(settings.model_dump_json())
    seen: list[StepMetrics] = []
    killed: list[int] = []

    def on_step(m: StepMetrics) -> None:
        seen.append(m)
        if m.step == 3 and not killed:  # between steps 3 and 4: step 4's update finds it gone
            killed.append(learner_pid())
            os.kill(killed[0], signal.SIGKILL)

    assert train(settings, run, on_step, lambda _: None) == 5
    assert killed and learner_pid() != killed[0]  # a new learner process finished the run
    assert [m.step for m in seen] == [1, 2, 3, 3, 4, 5]  # step 3 played again, from step 2's checkpoint
    first, again = seen[2], seen[3]
    assert (again.trajectories, again.tokens, again.success_rate) == (
        first.trajectories,
        first.tokens,
        first.success_rate,
    )
    assert again.loss == pytest.approx(first.loss, rel=1e-3)  # the same batch on the same weights
    assert again.rollout_weights_version == first.rollout_weights_version == 2
    metrics = read_jsonl(run.path("metrics.jsonl"), StepMetrics)
    assert [m.step for m in metrics] == [1, 2, 3, 4, 5]  # every step once
    assert [m.weights_version for m in metrics] == [1, 2, 3, 4, 5]
    assert [m.rollout_weights_version for m in metrics] == [0, 1, 2, 3, 4]
    assert all(m.failed_episodes == 0 for m in metrics)
    assert_decisions_equal_replay(run.root, 5, settings.depth, lag=0)
    (restart,) = read_jsonl(run.path(RESTARTS_FILE), RestartResult)
    assert (restart.service, restart.ok, restart.step) == ("learner", True, 2)
    assert "learner lost in step 4" in restart.message and "step 3 is played again" in restart.message
    assert latest_checkpoint(run.root).name == "step_000005"
