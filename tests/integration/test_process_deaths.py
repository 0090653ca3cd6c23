"""Processes SIGKILLed from outside mid-run, and the run goes on (issue 60): a 6-step run with a
checkpoint every 2 steps, where the embedded redis-server, the env gateway process, the learner's
process and the `run-control` actor are each SIGKILLed at a seeded random moment inside steps 2,
3, 4 and 5 (``TURNOPD_CHAOS_SEED``; the seed and moments are printed); synchronous, then with
rollouts overlapping the learner (staleness 1).

The watchdog restarts redis-server on its append-only file and replaces the gateway (the chunks
that lost episodes with it are played again); Ray restarts `run-control`; the run restarts the
learner from its latest logged checkpoint, every other service still running, and plays the steps
after it again (at staleness 0 exactly as before). Afterwards every step is logged once, no
episode failed, the controller equals its replay under the run's staleness, and each recovery is
in restarts.jsonl."""

import json
import os
import random
import signal
import threading
import time

import pytest
from controller_replay import assert_decisions_equal_replay
from rollout_fixtures import override_sections, short_run, smoke_config

from services.contracts.jsonl import read_jsonl
from services.contracts.operations import RestartResult
from services.contracts.orchestrator import StepMetrics
from services.learner.checkpoint import latest_checkpoint
from services.operations.process_table import the_process
from services.orchestrator.pipeline import train
from services.run_dir import RESTARTS_FILE, RunDir
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SEED = int(os.environ.get("TURNOPD_CHAOS_SEED", "60"))


@pytest.mark.parametrize("staleness", [0, 1])
def test_killed_processes_are_replaced_and_the_run_finishes_every_step_once(ray_session, tmp_path, staleness):
    config = tmp_path / "deaths.toml"
    overrides = short_run(6, "rollout_workers = 1", checkpoint_every=2)
    pipeline = f"\n[pipeline]\nmax_staleness = {staleness}\nstream_teacher = {str(staleness == 1).lower()}\n"
    config.write_text(override_sections(smoke_config(tmp_path).read_text(), overrides) + pipeline)
    settings = load_settings(config)
    assert (settings.learner.checkpoint_every, settings.learner.max_restarts) == (2, 3)
    assert settings.pipeline.max_staleness == staleness and not settings.controller.resolved_redis_url()
    run = RunDir(settings.run.run_dir)
    run.create(settings.model_dump_json())
    here = str(tmp_path)
    victims = {  # after step k's line, somewhere inside the next step: what is killed
        # redis-server retitles itself ".../redis-server 127.0.0.1:PORT" and runs in its data directory
        1: ("redis-server", lambda p: "redis-server " in p.command and p.cwd.startswith(here)),
        2: ("env gateway", lambda p: "serve env-gateway" in p.command and here in p.command),
        3: ("learner", lambda p: p.command.startswith("ray::SoloLearnerWorker")),
        4: ("run-control", lambda p: p.command.startswith("ray::RunControlActor")),
    }
    rng = random.Random(SEED * 10 + staleness)
    seen: list[StepMetrics] = []
    killed: dict[str, int] = {}
    kills: list[threading.Thread] = []
    finished_by: list[int] = []

    def kill(name, match, delay):
        time.sleep(delay)
        killed[name] = the_process(match).pid
        os.kill(killed[name], signal.SIGKILL)

    def on_step(m: StepMetrics) -> None:
        seen.append(m)
        if m.step == 6:
            finished_by.append(the_process(victims[3][1]).pid)
        if m.step in victims and victims[m.step][0] not in killed and len(kills) < m.step:
            name, match = victims[m.step]
            delay = round(rng.uniform(0.0, min(m.times.total_s, 4.0)), 2)
            print(f"seed {SEED}, staleness {staleness}: SIGKILL {name} at step {m.step} + {delay:.2f} s")
            kills.append(threading.Thread(target=kill, args=(name, match, delay), daemon=True))
            kills[-1].start()

    assert train(settings, run, on_step, lambda _: None) == 6
    for thread in kills:
        thread.join(timeout=60)
    assert set(killed) == {"redis-server", "env gateway", "learner", "run-control"}
    assert finished_by and finished_by[-1] != killed["learner"]  # a new learner process finished the run
    metrics = read_jsonl(run.path("metrics.jsonl"), StepMetrics)
    assert [m.step for m in metrics] == [1, 2, 3, 4, 5, 6]  # every step once
    assert [m.weights_version for m in metrics] == [1, 2, 3, 4, 5, 6]
    assert all(m.failed_episodes == 0 for m in metrics)  # the gateway's death lost no episode
    assert_decisions_equal_replay(run.root, 6, settings.depth, lag=staleness)
    restarts = {r.request_id: r for r in read_jsonl(run.path(RESTARTS_FILE), RestartResult)}
    assert set(restarts) == {"watchdog-redis-1", "watchdog-env-gateway-2", "learner-lost-1"}, restarts
    assert all(r.ok for r in restarts.values())
    assert "redis-server restarted on port" in restarts["watchdog-redis-1"].message
    assert "env gateway replaced" in restarts["watchdog-env-gateway-2"].message
    lost = restarts["learner-lost-1"]
    checkpoint = lost.step  # the latest checkpoint of a logged step when the learner went
    assert lost.service == "learner" and checkpoint in (2, 4)
    # the steps after that checkpoint were played again, once each, and only those
    replayed = [m.step for m in seen]
    again_from = next(i for i in range(1, len(replayed)) if replayed[i] <= replayed[i - 1])
    assert replayed[again_from] == checkpoint + 1
    assert replayed[:again_from] == list(range(1, replayed[again_from - 1] + 1))
    assert replayed[again_from:] == list(range(checkpoint + 1, 7))
    if staleness == 0:  # the same batches on the same weights: each step again as it was
        first = {m.step: m for m in seen[:again_from]}
        for m in seen[again_from:]:
            if m.step in first:
                assert (m.tokens, m.trajectories) == (first[m.step].tokens, first[m.step].trajectories)
                assert m.loss == pytest.approx(first[m.step].loss, rel=1e-3)
    assert latest_checkpoint(run.root).name == "step_000006"
    plan = json.loads(run.path("plan.json").read_text())  # rewritten after each restart
    assert plan["driver"]["step_loop"]["staleness"] == staleness
    assert plan["services"]["learner"]["learner"]["max_restarts"] == 3
