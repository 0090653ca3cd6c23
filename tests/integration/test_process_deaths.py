"""Processes killed from outside mid-run, and the run goes on (issue 60): a synchronous 6-step run
with a checkpoint every 2 steps, where after step 1 the embedded redis-server, after step 2 the
env gateway process, after step 3 the learner's process and after step 4 the `run-control` actor
are SIGKILLed.

The watchdog restarts redis-server on its append-only file and replaces the gateway; Ray restarts
`run-control`; the run restarts the learner from step 2's checkpoint, every other service still
running, and plays step 3 again exactly as before. Afterwards every step is logged once, the
controller equals its replay, and each recovery is in restarts.jsonl."""

import os
import signal
from pathlib import Path

import pytest
from controller_replay import assert_decisions_equal_replay
from rollout_fixtures import override_sections, short_run, smoke_config

from services.contracts.jsonl import read_jsonl
from services.contracts.operations import RestartResult
from services.contracts.orchestrator import StepMetrics
from services.learner.checkpoint import latest_checkpoint
from services.orchestrator.pipeline import train
from services.run_dir import RESTARTS_FILE, RunDir
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def processes() -> dict[int, tuple[str, str, int]]:
    """Every process: its command line (or Ray's title for an actor), working directory and parent."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                cwd = os.readlink(entry / "cwd")
                stat = (entry / "stat").read_text()
            except OSError:  # gone meanwhile, or not ours to read
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            found[int(entry.name)] = (line, cwd, parent)
    return found


def the_pid(match) -> int:
    """The one process ``match(line, cwd)`` accepts whose parent it does not (forked workers share
    their parent's command line)."""
    every = processes()
    hits = {pid for pid, (line, cwd, _) in every.items() if match(line, cwd)}
    (pid,) = [pid for pid in hits if every[pid][2] not in hits]
    return pid


def test_killed_processes_are_replaced_and_the_run_finishes_every_step_once(ray_session, tmp_path: Path):
    config = tmp_path / "deaths.toml"
    overrides = short_run(6, "rollout_workers = 1", checkpoint_every=2)
    config.write_text(override_sections(smoke_config(tmp_path).read_text(), overrides))
    settings = load_settings(config)
    assert (settings.learner.checkpoint_every, settings.learner.max_restarts) == (2, 3)
    assert settings.pipeline.max_staleness == 0 and not settings.controller.resolved_redis_url()
    run = RunDir(settings.run.run_dir)
    run.create(settings.model_dump_json())
    here = str(tmp_path)
    victims = {  # after step k: what is killed
        # redis-server retitles itself ".../redis-server 127.0.0.1:PORT" and runs in its data directory
        1: ("redis-server", lambda line, cwd: "redis-server " in line and cwd.startswith(here)),
        2: ("env gateway", lambda line, cwd: "env-gateway" in line and here in line and "ray::" not in line),
        3: ("learner", lambda line, cwd: line.startswith("ray::SoloLearnerWorker")),
        4: ("run-control", lambda line, cwd: line.startswith("ray::RunControlActor")),
    }
    seen: list[StepMetrics] = []
    killed: dict[str, int] = {}
    finished_by: list[int] = []

    def on_step(m: StepMetrics) -> None:
        seen.append(m)
        if m.step in victims and victims[m.step][0] not in killed:
            name, match = victims[m.step]
            killed[name] = the_pid(match)
            print(f"SIGKILL {name} (pid {killed[name]}) after step {m.step}")
            os.kill(killed[name], signal.SIGKILL)
        if m.step == 6:
            finished_by.append(the_pid(victims[3][1]))

    assert train(settings, run, on_step, lambda _: None) == 6
    assert set(killed) == {"redis-server", "env gateway", "learner", "run-control"}
    assert finished_by and finished_by[0] != killed["learner"]  # a new learner process finished the run
    assert [m.step for m in seen] == [1, 2, 3, 3, 4, 5, 6]  # step 3 played again, from step 2's checkpoint
    first, again = seen[2], seen[3]
    assert (again.trajectories, again.tokens, again.success_rate) == (
        first.trajectories,
        first.tokens,
        first.success_rate,
    )
    assert again.loss == pytest.approx(first.loss, rel=1e-3)  # the same batch on the same weights
    assert again.rollout_weights_version == first.rollout_weights_version == 2
    metrics = read_jsonl(run.path("metrics.jsonl"), StepMetrics)
    assert [m.step for m in metrics] == [1, 2, 3, 4, 5, 6]  # every step once
    assert [m.weights_version for m in metrics] == [1, 2, 3, 4, 5, 6]
    assert [m.rollout_weights_version for m in metrics] == [0, 1, 2, 3, 4, 5]
    assert all(m.failed_episodes == 0 for m in metrics)  # the gateway's death lost no episode
    assert_decisions_equal_replay(run.root, 6, settings.depth, lag=0)
    restarts = {r.request_id: r for r in read_jsonl(run.path(RESTARTS_FILE), RestartResult)}
    assert set(restarts) == {"watchdog-redis-1", "watchdog-env-gateway-2", "learner-lost-1"}, restarts
    assert all(r.ok for r in restarts.values())
    assert "redis-server restarted on port" in restarts["watchdog-redis-1"].message
    assert "env gateway replaced" in restarts["watchdog-env-gateway-2"].message
    lost = restarts["learner-lost-1"]
    assert (lost.service, lost.step) == ("learner", 2)
    assert "learner lost in step 4" in lost.message and "step 3 is played again" in lost.message
    assert latest_checkpoint(run.root).name == "step_000006"
