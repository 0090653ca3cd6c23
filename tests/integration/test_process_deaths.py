"""Processes SIGKILLed from outside mid-run, and the run goes on (issue 60): a 7-step run with a
checkpoint every 2 steps, where the embedded redis-server, one env worker process, the env gateway
process, the learner's process, the `run-control` actor and the teacher's Serve replica are each
SIGKILLed at a seeded random moment inside steps 2..7 (``TURNOPD_CHAOS_SEED``; the seed and
moments are printed); synchronous, then with rollouts overlapping the learner (staleness 1).

The watchdog restarts redis-server on its append-only file and replaces the gateway, the gateway
replaces its worker (the chunks that lost episodes with either are played again), Ray restarts
`run-control`, Serve the replica; the run restarts the learner from its latest logged checkpoint,
every other service still running, and plays the steps after it again (at staleness 0 exactly as
before). Afterwards every step is logged once, no episode failed, the controller equals its replay
under the run's staleness, and each recovery is in restarts.jsonl."""

import json
import os
import random
import signal
import threading
import time
from collections.abc import Callable

import pytest
from controller_replay import assert_decisions_equal_replay
from rollout_fixtures import override_sections, short_run, smoke_config

from services.contracts.jsonl import read_jsonl
from services.contracts.operations import RestartResult
from services.contracts.orchestrator import StepMetrics
from services.learner.checkpoint import latest_checkpoint
from services.operations.process_table import run_process
from services.orchestrator.pipeline import train
from services.run_dir import RESTARTS_FILE, RunDir
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SEED = int(os.environ.get("TURNOPD_CHAOS_SEED", "60"))
STEPS = 7


@pytest.mark.parametrize("staleness", [0, 1])
def test_killed_processes_are_replaced_and_the_run_finishes_every_step_once(ray_session, tmp_path, staleness):
    config = tmp_path / "deaths.toml"
    overrides = short_run(STEPS, "rollout_workers = 1", checkpoint_every=2)
    pipeline = f"\n[pipeline]\nmax_staleness = {staleness}\nstream_teacher = {str(staleness == 1).lower()}\n"
    config.write_text(override_sections(smoke_config(tmp_path).read_text(), overrides) + pipeline)
    settings = load_settings(config)
    assert (settings.learner.checkpoint_every, settings.learner.max_restarts) == (2, 3)
    assert settings.pipeline.max_staleness == staleness and not settings.controller.resolved_redis_url()
    run = RunDir(settings.run.run_dir)
    run.create(settings)
    me = os.getpid()  # this run's processes: ours, below this test's process

    def pid_of(kind: str) -> Callable[[], int]:
        return lambda: run_process(kind, run.root, within=me)

    victims = {  # after step k's line, somewhere inside the next step: what is killed
        1: ("redis-server", pid_of("redis-server")),
        2: ("env worker", pid_of("env-worker")),
        # after an odd step: the learner dies in or after an even one, past its last checkpoint
        3: ("learner", pid_of("learner")),
        4: ("env gateway", pid_of("env-gateway")),
        5: ("run-control", pid_of("run-control")),
        6: ("teacher replica", pid_of("teacher-replica")),
    }
    rng = random.Random(SEED * 10 + staleness)
    seen: list[StepMetrics] = []
    killed: dict[str, int] = {}
    kills: list[threading.Thread] = []
    finished_by: list[int] = []

    def kill(name, find, delay):
        time.sleep(delay)
        killed[name] = find()
        os.kill(killed[name], signal.SIGKILL)

    def on_step(m: StepMetrics) -> None:
        seen.append(m)
        if m.step == STEPS:
            finished_by.append(victims[3][1]())
        if m.step in victims and victims[m.step][0] not in killed and len(kills) < m.step:
            name, find = victims[m.step]
            delay = round(rng.uniform(0.0, min(m.times.total_s, 4.0)), 2)
            print(f"seed {SEED}, staleness {staleness}: SIGKILL {name} at step {m.step} + {delay:.2f} s")
            kills.append(threading.Thread(target=kill, args=(name, find, delay), daemon=True))
            kills[-1].start()

    assert train(settings, run, on_step, lambda _: None) == STEPS
    for thread in kills:
        thread.join(timeout=60)
    assert set(killed) == {name for name, _ in victims.values()}
    assert finished_by and finished_by[-1] != killed["learner"]  # a new learner process finished the run
    logs = "".join(path.read_text(errors="replace") for path in run.root.glob("env_gateway*.log"))
    assert "replacing env worker slot" in logs  # the gateway saw its worker die and replaced it
    metrics = read_jsonl(run.path("metrics.jsonl"), StepMetrics)
    assert [m.step for m in metrics] == list(range(1, STEPS + 1))  # every step once
    assert [m.weights_version for m in metrics] == list(range(1, STEPS + 1))
    assert all(m.failed_episodes == 0 for m in metrics)  # the gateway's death lost no episode
    assert_decisions_equal_replay(run.root, STEPS, settings.depth, lag=staleness)
    restarts = {r.request_id: r for r in read_jsonl(run.path(RESTARTS_FILE), RestartResult)}
    assert set(restarts) == {"watchdog-redis-1", "watchdog-env-gateway-2", "learner-lost-1"}, restarts
    assert all(r.ok for r in restarts.values())
    assert "redis-server restarted on port" in restarts["watchdog-redis-1"].message
    assert "env gateway replaced" in restarts["watchdog-env-gateway-2"].message
    lost = restarts["learner-lost-1"]
    checkpoint = lost.step  # the latest checkpoint of a logged step when the learner went
    assert lost.service == "learner" and checkpoint in (2, 4, 6)
    # the steps after that checkpoint were played again, once each, and only those
    replayed = [m.step for m in seen]
    again = [i for i in range(1, len(replayed)) if replayed[i] <= replayed[i - 1]]
    again_from = again[0] if again else len(replayed)
    if again:
        assert replayed[again_from] == checkpoint + 1
        assert replayed[:again_from] == list(range(1, replayed[again_from - 1] + 1))
        assert replayed[again_from:] == list(range(checkpoint + 1, STEPS + 1))
    else:  # the learner went right after its checkpoint's step was logged: nothing to play again
        assert replayed == list(range(1, STEPS + 1))
    if staleness == 0:  # the same batches on the same weights: each step again as it was
        first = {m.step: m for m in seen[:again_from]}
        for m in seen[again_from:]:
            if m.step in first:
                assert (m.tokens, m.trajectories) == (first[m.step].tokens, first[m.step].trajectories)
                assert m.loss == pytest.approx(first[m.step].loss, rel=1e-3)
    assert latest_checkpoint(run.root).name == f"step_{STEPS:06d}"
    plan = json.loads(run.path("plan.json").read_text())  # rewritten after each restart
    assert plan["driver"]["step_loop"]["staleness"] == staleness
    assert plan["services"]["learner"]["learner"]["max_restarts"] == 3
