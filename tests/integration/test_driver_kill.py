"""A SIGKILLed driver, then `turnopd train --resume` (issue 60): `turnopd train` runs in a process
of its own joined to this test's Ray cluster (as on a cluster that outlives its drivers) and is
SIGKILLed at a seeded random moment inside step 4 (``TURNOPD_CHAOS_SEED``, printed), its
redis-server, Serve app and actors left behind; synchronous, then with rollouts overlapping the
learner (staleness 1).

The resumed run takes over what the killed one left (it stops the orphan redis-server, so one
server writes the append-only file) and trains from the latest checkpoint of a logged step.
Afterwards every step is logged once, at most ``checkpoint_every - 1`` steps were trained again,
the controller equals its replay under the run's staleness, at staleness 0 each step trained again
is the step it was (tokens, episodes, loss), and no redis-server of the run is left running.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray
from controller_replay import assert_decisions_equal_replay
from rollout_fixtures import override_sections, short_run, smoke_config

from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import StepMetrics
from services.operations.process_table import RUN_PROCESSES, processes
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("TURNOPD_CHAOS_SEED", "60"))
STEPS, EVERY = 4, 2


def turnopd(*args: str) -> subprocess.Popen[str]:
    """`turnopd ARGS` in a process of its own, joined to this test's Ray cluster."""
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def logged(run: Path) -> list[StepMetrics]:
    path = run / "metrics.jsonl"
    return read_jsonl(path, StepMetrics) if path.exists() else []


def redis_servers(run: Path) -> list[int]:
    """The pids of redis-servers serving this run's data, wherever their parent went."""
    return [p.pid for p in processes().values() if RUN_PROCESSES["redis-server"](p, str(run))]


@pytest.mark.parametrize("staleness", [0, 1])
def test_a_sigkilled_driver_resumes_with_every_step_once_and_one_redis_server(
    ray_session, tmp_path, staleness
):
    config = tmp_path / "driver.toml"
    overrides = short_run(STEPS, "rollout_workers = 1", checkpoint_every=EVERY)
    pipeline = f"\n[pipeline]\nmax_staleness = {staleness}\nstream_teacher = {str(staleness == 1).lower()}\n"
    config.write_text(override_sections(smoke_config(tmp_path).read_text(), overrides) + pipeline)
    settings = load_settings(config)
    run = Path(settings.run.run_dir)
    rng = random.Random(SEED * 10 + staleness)

    driver = turnopd("train", "--config", str(config))
    deadline = time.monotonic() + 600
    while len(logged(run)) < STEPS - 1:  # inside the last step: the most a kill can throw away
        assert driver.poll() is None, driver.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "step 3 was not logged in 600 s"
        time.sleep(0.2)
    step_s = logged(run)[-1].times.total_s
    delay = round(rng.uniform(0.0, 0.8 * step_s), 2)
    print(f"seed {SEED}, staleness {staleness}: SIGKILL the driver at step {STEPS - 1} + {delay:.2f} s")
    time.sleep(delay)
    assert driver.poll() is None, "the run ended before its driver was killed"
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait(timeout=60)
    before = {m.step: m for m in logged(run)}
    saved = [p.name.removeprefix("step_") for p in (run / "checkpoints").glob("step_*")]
    resumed_from = max((int(n) for n in saved if n.isdigit() and int(n) <= max(before)), default=0)
    assert len(redis_servers(run)) == 1  # the killed driver's server lives on, orphaned

    resumed = turnopd("train", "--resume", str(run))
    said, _ = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, said[-3000:]
    metrics = logged(run)
    assert [m.step for m in metrics] == list(range(1, STEPS + 1))  # every step once
    assert [m.weights_version for m in metrics] == list(range(1, STEPS + 1))
    assert all(m.failed_episodes == 0 for m in metrics)
    redone = max(before) - resumed_from
    assert 0 <= redone <= EVERY - 1, (sorted(before), saved)
    assert_decisions_equal_replay(run, STEPS, settings.depth, lag=staleness)
    kept = {m.step: m for m in metrics}
    for step in range(1, resumed_from + 1):  # before the checkpoint: the lines the killed run wrote
        assert kept[step] == before[step]
    if staleness == 0:  # trained again on the same weights with the same seeds: the same step
        for step in range(resumed_from + 1, max(before) + 1):
            again, first = kept[step], before[step]
            assert (again.tokens, again.trajectories) == (first.tokens, first.trajectories)
            assert again.loss == pytest.approx(first.loss, rel=1e-3)
    assert redis_servers(run) == []  # the orphan was stopped, the resumed run's own with its end
    plan = json.loads((run / "plan.json").read_text())
    assert plan["driver"]["step_loop"]["staleness"] == staleness
