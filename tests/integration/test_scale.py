"""`turnopd scale` on a live run: the rollout pool grown 1 -> 2 and shrunk back, the teacher grown
1 -> 2 replicas, bad requests refused with what is wrong; training never loses or repeats a step.

The run plays the shop, chosen by config alone (`[rollout] env`): the pipeline is the household's,
the env's own reward, turn budget and task types land in the run directory (the search env trains
as a source in tests/integration/test_multi_env.py).

The scale requests go through ``services.operations.run_client`` (what `turnopd scale` calls),
and the CLI itself runs in a subprocess for the teacher and for the refusals.
"""

import threading
from typing import Any

import pytest
import ray
from cluster_cli import cli
from rollout_fixtures import override_sections, short_run, smoke_config

from services.contracts.jsonl import read_jsonl
from services.contracts.operations import RestartResult, RunStatus, WorkerHealth
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.contracts.records import TurnStatsRecord
from services.envs.webshop.vocabulary import CATEGORIES
from services.operations.run_client import run_status, submit_scale, wait_restart
from services.orchestrator.pipeline import train
from services.run_dir import RESTARTS_FILE, RunDir
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
STEPS = 5
OVERRIDES = short_run(STEPS, "rollout_workers = 1").replace("interval = 100", f"interval = {STEPS}")


def worker_version(index: int) -> int:
    health: WorkerHealth = ray.get(
        ray.get_actor(f"rollout-worker-{index}", namespace="turnopd").health.remote(), timeout=60
    )
    return health.weights_version


def test_pools_resized_while_training(ray_session, tmp_path):
    config = tmp_path / "scale.toml"
    text = override_sections(smoke_config(tmp_path).read_text(), OVERRIDES)
    config.write_text(text.replace("[rollout]\n", '[rollout]\nenv = "webshop"\n'))
    settings = load_settings(config)
    assert settings.rollout.env == "webshop" and settings.eval.interval == STEPS
    run = RunDir(settings.run.run_dir)
    run.create(settings)
    seen: dict[str, Any] = {}
    threads: list[threading.Thread] = []

    def later(key: str, fn, *args) -> None:
        def go() -> None:
            seen[key] = fn(*args)

        threads.append(threading.Thread(target=go, daemon=True))
        threads[-1].start()

    def grown() -> tuple[RestartResult, RunStatus, int]:
        result = wait_restart(submit_scale("rollout", 2), 600)
        return result, run_status(), worker_version(1)  # the new worker, right after it joined

    def on_step(m: StepMetrics) -> None:
        match m.step:
            case 1:  # on the step loop's thread: nothing is published until it returns
                seen["grown"] = grown()
            case 2:
                later("teacher", cli, "scale", "teacher", "2")
                seen["refused"] = [cli("scale", "rollout", "0"), cli("scale", "learner", "2")]
            case 3:
                later("too_many", lambda: wait_restart(submit_scale("rollout", 400), 600))
                later("shrunk", lambda: wait_restart(submit_scale("rollout", 1), 600))
            case 4:
                for thread in threads:
                    thread.join(timeout=600)
                seen["status"] = run_status()

    assert train(settings, run, on_step, lambda _: None) == STEPS

    metrics = read_jsonl(run.path("metrics.jsonl"), StepMetrics)
    assert [m.step for m in metrics] == list(range(1, STEPS + 1))
    assert [m.weights_version for m in metrics] == list(range(1, STEPS + 1))
    assert all(m.failed_episodes == 0 and m.trajectories == settings.optim.batch for m in metrics)
    # the shop's own episodes: within its turn budget, scored, and evaluated on its own task types
    assert all(m.loss > 0 and m.tokens > 0 and 1 <= m.h_roll <= settings.rollout.max_turns for m in metrics)
    assert [r.step for r in read_jsonl(run.path("turn_stats.jsonl"), TurnStatsRecord)] == list(
        range(1, STEPS + 1)
    )
    [record] = read_jsonl(run.path("eval.jsonl"), EvalRecord)
    assert (record.step, record.split, record.episodes) == (STEPS, "valid_unseen", 2)
    assert record.per_task_type and set(record.per_task_type) <= set(CATEGORIES)

    result, status, version = seen["grown"]
    assert result.ok and result.message.startswith("rollout pool 1 -> 2 workers at weights version ")
    held = int(result.message.rsplit(" ", 1)[1])
    # grown while the step loop waited on step 1's line (the pool gets a step's weights after its
    # line): the new worker loaded exactly the pool's version, the one before, before it could play
    assert version == held == status.weights_version == metrics[0].weights_version - 1 == 0
    assert [s.name for s in status.services if s.name.startswith("rollout-worker-")] == [
        "rollout-worker-0",
        "rollout-worker-1",
    ]

    teacher = seen["teacher"]
    assert teacher.returncode == 0, teacher.stderr
    assert "teacher: teacher 1 -> 2 replicas" in teacher.stdout
    zero, learner = seen["refused"]
    assert zero.returncode == 2 and "error: a pool needs at least 1 replica, not 0" in zero.stderr
    assert (
        learner.returncode == 2
        and "error: unknown pool 'learner'; one of: rollout, teacher" in learner.stderr
    )

    too_many = seen["too_many"]
    assert not too_many.ok and "rollout worker(s) need CPU 0.25 each" in too_many.message
    assert "short of CPU" in too_many.message
    assert seen["shrunk"].ok and seen["shrunk"].message.startswith("rollout pool 2 -> 1 workers")

    final: RunStatus = seen["status"]
    assert [s.name for s in final.services if s.name.startswith("rollout-worker-")] == ["rollout-worker-0"]
    [served] = [s for s in final.services if s.name == "teacher"]
    assert served.detail == "Serve app 'teacher', 2 replica(s)"
    with pytest.raises(ValueError):
        ray.get_actor("rollout-worker-1", namespace="turnopd")
    logged = read_jsonl(run.path(RESTARTS_FILE), RestartResult)
    assert sorted(r.message.split(" at ")[0] for r in logged if r.ok) == [
        "rollout pool 1 -> 2 workers",
        "rollout pool 2 -> 1 workers",
        "teacher 1 -> 2 replicas",
    ]
