"""Chaos: a real training run during which every service is replaced once, and a rollout worker and the
controller are SIGKILLed; once synchronous, once with rollouts overlapping the learner (staleness 1).

Every restart is issued as a user does, by `turnopd restart NAME` in a separate process, and lands
at a seeded random moment inside a step (rollout, scoring, the learner's update, a plan or an
ingest), not only between steps: after step k's callback each action waits a random part of the
step's time. The seed and the moments are printed (``TURNOPD_CHAOS_SEED`` replays them; the run's
own timing still varies). Afterwards every step 1..K is logged exactly once with nothing lost, each
with the weights version the staleness allows, the controller's H_bar series equals an independent
replay of the run's probes under that staleness, and the final weights version is K.
"""

import json
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import ray
from cluster_cli import cli
from controller_replay import assert_decisions_equal_replay
from ray.exceptions import ActorUnavailableError, GetTimeoutError
from rollout_fixtures import override_sections, short_run, smoke_config

from services.contracts.jsonl import read_jsonl
from services.contracts.operations import ControllerHealth, RestartResult, RunStatus, WorkerHealth
from services.contracts.orchestrator import StepMetrics
from services.orchestrator.pipeline import train
from services.run_dir import RESTARTS_FILE, RunDir
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
STEPS = 8
OVERRIDES = short_run(STEPS, "rollout_workers = 2", "restart_timeout_s = 180.0")
SEED = int(os.environ.get("TURNOPD_CHAOS_SEED", "33"))


def chaos_config(tmp_path: Path) -> Path:
    """configs/smoke.toml on the test caches, 8 steps, two rollout workers, checkpoints only at the end."""
    path = tmp_path / "chaos.toml"
    path.write_text(override_sections(smoke_config(tmp_path).read_text(), OVERRIDES))
    return path


def worker_health(name: str) -> WorkerHealth:
    health: WorkerHealth = ray.get(ray.get_actor(name, namespace="turnopd").health.remote(), timeout=60)
    return health


def controller_pid_after_restart(actor: Any, killed_pid: int, deadline_s: float = 180.0) -> int:
    """The pid of the controller Ray started in place of ``killed_pid``. A call that reaches the actor
    while Ray is still noticing the death fails with ActorUnavailableError once its retries are spent
    (they can all be spent in a few ms); asked again until an answer comes from a new process."""
    deadline, last = time.monotonic() + deadline_s, "no call made"
    while time.monotonic() < deadline:
        try:
            after: ControllerHealth = ray.get(actor.health.remote(), timeout=30)
        except (ActorUnavailableError, GetTimeoutError) as exc:
            last = f"{type(exc).__name__}: {exc}"[:300]
        else:
            if after.pid != killed_pid:
                return after.pid
            last = f"still answered by the killed pid {killed_pid}"
        time.sleep(0.5)
    raise AssertionError(f"the controller did not come back in {deadline_s:g} s after its SIGKILL ({last})")


def chaos_run(
    tmp_path: Path, staleness: int, on_step_services: dict[int, list[str]]
) -> tuple[Any, RunDir, dict]:
    """Train ``chaos_config`` with ``[pipeline] max_staleness = staleness``; after step k, at a random
    moment of the next step, do the actions listed for k (``restart:NAME`` by the CLI, ``cli-status``,
    ``sigkill:worker``, ``sigkill:controller``). Returns the settings, the run and what the background
    actions saw."""
    config = chaos_config(tmp_path)
    steps = max(on_step_services) + 1
    config.write_text(
        config.read_text().replace("steps = 8", f"steps = {steps}")
        + f"\n[pipeline]\nmax_staleness = {staleness}\nstream_teacher = {str(staleness > 0).lower()}\n"
    )
    settings = load_settings(config)
    assert settings.optim.steps == steps and settings.cluster.rollout_workers == 2
    run = RunDir(settings.run.run_dir)
    run.create(settings)
    background: list[threading.Thread] = []
    seen: dict[str, Any] = {}
    rng = random.Random(f"{SEED}/{staleness}")

    kills: list[threading.Thread] = []  # the run's last step waits for these to be over
    cli_threads: dict[str, threading.Thread] = {}  # `turnopd restart NAME` by NAME

    def later(delay: float, fn, *args) -> threading.Thread:
        def go() -> None:
            time.sleep(delay)
            try:
                fn(*args)
            except Exception as exc:  # a thread's error is otherwise lost: the check names it
                seen.setdefault("errors", []).append(f"{fn.__name__}{args}: {type(exc).__name__}: {exc}")

        thread = threading.Thread(target=go, daemon=True)
        thread.start()
        background.append(thread)
        return thread

    def sigkill_worker() -> None:
        before = worker_health("rollout-worker-1").pid
        os.kill(before, signal.SIGKILL)
        seen["killed_pid"] = before

    def sigkill_controller() -> None:
        # a `turnopd restart controller` drawn earlier lands at a later step boundary: the SIGKILL
        # waits for it, or the handle it kills through can be the one the restart kills for good
        if (restart := cli_threads.get("controller")) is not None:
            restart.join(timeout=600)
        actor = ray.get_actor("controller", namespace="turnopd")
        before: ControllerHealth = ray.get(actor.health.remote(), timeout=60)
        os.kill(before.pid, signal.SIGKILL)  # Ray restarts it; it reloads its state from Redis
        seen["controller_pids"] = (before.pid, controller_pid_after_restart(actor, before.pid))

    def cli_restart(service: str) -> None:
        seen[f"cli_{service}"] = cli("restart", service, "--timeout", "600")

    def cli_status() -> None:
        asked = time.time()
        seen["status"] = cli("status", "--json")
        seen["status_window"] = (asked, time.time())

    def on_step(m: StepMetrics) -> None:
        if m.step == steps - 1:
            # a SIGKILL and the recovery it starts land inside the run, however late in the step
            # before it was drawn (the run stops its services the moment its last step is logged)
            for thread in kills:
                thread.join(timeout=300)
                assert not thread.is_alive(), "a SIGKILL's recovery did not finish in 300 s"
        for action in on_step_services.get(m.step, []):
            kind, _, name = action.partition(":")
            # somewhere inside the next step (a step after a recovery can be long: at most 8 s)
            delay = round(rng.uniform(0.0, min(m.times.total_s, 8.0)), 2)
            print(f"chaos seed {SEED}, staleness {staleness}: {action} at step {m.step} + {delay:.2f} s")
            match kind:
                case "restart":
                    cli_threads[name] = later(delay, cli_restart, name)
                case "cli-status":
                    later(delay, cli_status)
                case "sigkill" if name == "worker":
                    kills.append(later(delay, sigkill_worker))
                case "sigkill" if name == "controller":
                    kills.append(later(delay, sigkill_controller))
                case _:
                    raise AssertionError(action)

    assert train(settings, run, on_step, lambda _: None) == steps
    for thread in background:
        thread.join(timeout=600)
    return settings, run, seen


def check_chaos_run(
    settings: Any, run: RunDir, seen: dict, learner_after: tuple[int, ...], status_after: int
) -> None:
    """Every step once with nothing lost, the controller equal to a replay under the run's staleness,
    every service replaced once and successfully, and the CLI paths' answers."""
    steps, lag = settings.optim.steps, settings.pipeline.max_staleness
    assert not seen.get("errors"), seen["errors"]  # every background action finished without error
    metrics = read_jsonl(run.path("metrics.jsonl"), StepMetrics)
    assert [m.step for m in metrics] == list(range(1, steps + 1))
    assert [m.weights_version for m in metrics] == list(range(1, steps + 1))
    assert [m.rollout_weights_version for m in metrics] == [max(k - 1 - lag, 0) for k in range(1, steps + 1)]
    assert all(m.failed_episodes == 0 and m.trajectories == settings.optim.batch for m in metrics)
    assert metrics[-1].cumulative_s == pytest.approx(sum(m.times.total_s for m in metrics))

    # the controller's H_bar series is continuous and equals a replay of the run's own probes
    decisions = assert_decisions_equal_replay(run.root, steps, settings.depth, lag)
    assert [d.step for d in decisions] == list(range(1, steps + 1))
    assert [m.h_bar for m in metrics] == [d.h_bar for d in decisions]

    # each of the services was replaced once, successfully, while the run went on
    results = read_jsonl(run.path(RESTARTS_FILE), RestartResult)
    by_service = {r.service: r for r in results}
    assert sorted(by_service) == sorted(
        ["rollout-worker-0", "teacher", "env-gateway", "controller", "redis", "learner"]
    )
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    assert by_service["learner"].step in learner_after  # at a step boundary, after the request
    assert all(1 <= r.step < steps for r in results)

    # the CLI paths: every `turnopd restart NAME` and `turnopd status --json` against the live run
    for service, said in (
        ("env-gateway", "env gateway replaced"),
        ("controller", "controller replaced"),
        ("learner", "learner replaced"),
        ("rollout-worker-0", "rollout-worker-0 replaced"),
    ):
        restarted = seen[f"cli_{service}"]
        assert restarted.returncode == 0, restarted.stderr
        assert said in restarted.stdout, restarted.stdout
    shown = seen["status"]
    assert shown.returncode == 0, shown.stderr
    status = RunStatus.model_validate_json(shown.stdout)
    assert status.step >= status_after and status.total_steps == steps and status.h_hat is not None
    assert status.pool_load is not None and status.weights_lag in (0, lag)
    names = [s.name for s in status.services]
    assert names == [
        "controller", "rollout-worker-0", "rollout-worker-1", "teacher", "env-gateway", "learner", "redis"
    ]  # fmt: skip
    health = {s.name: s for s in status.services}
    # the restarts land at random moments, one after the other: the status counts those that had
    # finished when it was read (between asking and answering, either way)
    asked, answered = seen["status_window"]
    for name in ("controller", "env-gateway", "redis", "teacher"):
        finished = [r.started_at + r.seconds for r in results if r.service == name]
        before, by_answer = sum(t < asked for t in finished), sum(t < answered for t in finished)
        assert before <= health[name].restarts <= by_answer, (name, health[name], finished, asked)
        assert health[name].health in ("ok", "restarting"), health[name]
    assert health["rollout-worker-1"].restarts >= 1  # its SIGKILL, seen by the step after it
    assert json.loads(shown.stdout)["run_dir"] == str(run.root.resolve())
    assert "killed_pid" in seen
    before, after = seen["controller_pids"]
    assert before != after  # the controller process really died mid-run, and the run went on


def test_every_service_restarted_during_training(ray_session, tmp_path):
    schedule = {
        1: ["restart:rollout-worker-0", "sigkill:worker"],
        2: ["restart:teacher"],
        3: ["restart:env-gateway"],
        4: ["restart:controller", "restart:redis"],
        5: ["restart:learner"],
        6: ["cli-status", "sigkill:controller"],
        7: [],  # a last step: every action above lands inside the run
    }
    settings, run, seen = chaos_run(tmp_path, 0, schedule)
    assert settings.optim.steps == STEPS
    check_chaos_run(settings, run, seen, learner_after=(5, 6, 7), status_after=6)


def test_every_service_restarted_while_rollouts_overlap_the_learner(ray_session, tmp_path):
    """The same with staleness 1 and streamed scoring, the restarts packed into the first 4 steps."""
    schedule = {
        1: ["restart:rollout-worker-0", "sigkill:worker"],
        2: ["restart:teacher", "restart:env-gateway"],
        3: ["restart:controller", "restart:redis"],
        4: ["restart:learner"],
        5: ["cli-status"],
        6: ["sigkill:controller"],
        7: [],  # a last step: every action above lands inside the run
    }
    settings, run, seen = chaos_run(tmp_path, 1, schedule)
    check_chaos_run(settings, run, seen, learner_after=(4, 5, 6), status_after=5)
