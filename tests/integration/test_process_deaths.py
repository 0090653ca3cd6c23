"""Every process of a run SIGKILLed from outside mid-run, the driver last, then `turnopd train
--resume` (issue 60, item 5): an 8-step run with a checkpoint every 2 steps, in a `turnopd train`
process of its own joined to this test's Ray cluster (as on a cluster that outlives its drivers).
The embedded redis-server, one env worker process, the learner's process, the env gateway process,
the `run-control` actor, the teacher's Serve replica and then the driver itself are each SIGKILLed
at a seeded random moment inside steps 2..8 (``TURNOPD_CHAOS_SEED``; the seed and moments are
printed); synchronous, then with rollouts overlapping the learner (staleness 1).

The watchdog restarts redis-server on its append-only file and replaces the gateway, the gateway
replaces its worker (the chunks that lost episodes with either are played again), Ray restarts
`run-control`, Serve the replica; the run restarts the learner from its latest logged checkpoint,
every other service still running, and plays the steps after it again (at staleness 0 exactly as
before). The killed driver leaves its redis-server behind; the resumed run stops that orphan, so one
server writes the append-only file, and trains from the latest checkpoint of a logged step.
Afterwards every step is logged once, no episode failed, at most ``checkpoint_every - 1`` steps were
trained again after the driver's death, the controller equals its replay under the run's staleness,
each recovery is in restarts.jsonl, and no redis-server of the run is left running.

One run per staleness for all seven kinds (before, the driver had a run of its own): each start of a
run's services costs the suite about 20 s."""

import json
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest
from cluster_cli import cli_process
from controller_replay import assert_decisions_equal_replay
from rollout_fixtures import override_sections, short_run, smoke_config

from services.contracts.jsonl import read_jsonl
from services.contracts.operations import RestartResult
from services.contracts.orchestrator import StepMetrics
from services.learner.checkpoint import latest_checkpoint
from services.operations.process_table import RUN_PROCESSES, processes, run_process
from services.run_dir import RESTARTS_FILE
from services.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow]
SEED = int(os.environ.get("TURNOPD_CHAOS_SEED", "60"))
STEPS, EVERY = 8, 2
VICTIMS = {  # after step k's first line, somewhere inside the next step: what is SIGKILLed
    1: "redis-server",
    2: "env-worker",
    3: "learner",  # after an odd step: the learner dies in or after an even one, past its checkpoint
    4: "env-gateway",
    5: "run-control",
    6: "teacher-replica",
    7: "driver",  # inside the last step: the most a driver's death can throw away
}


class Lines:
    """Every line metrics.jsonl ever held, in the order they appeared: the steps a learner's loss
    cuts back from the file stay here (polled every 0.1 s; a step takes seconds)."""

    def __init__(self, path: Path) -> None:
        self.path, self.seen, self._known = path, list[StepMetrics](), set[str]()

    def poll(self) -> None:
        if not self.path.exists():
            return
        whole = self.path.read_text().split("\n")[:-1]  # a line being written has no newline yet
        for line in whole:
            if line not in self._known:
                self._known.add(line)
                self.seen.append(StepMetrics.model_validate_json(line))

    def logged(self) -> list[StepMetrics]:
        return read_jsonl(self.path, StepMetrics) if self.path.exists() else []


def redis_servers(run: Path) -> list[int]:
    """The pids of redis-servers serving this run's data, wherever their parent went."""
    return [p.pid for p in processes().values() if RUN_PROCESSES["redis-server"](p, str(run))]


@pytest.mark.parametrize("staleness", [0, 1])
def test_every_process_killed_then_the_driver_and_the_resume_finish_every_step_once(
    ray_session, tmp_path, staleness
):
    config = tmp_path / "deaths.toml"
    overrides = short_run(STEPS, "rollout_workers = 1", checkpoint_every=EVERY)
    pipeline = f"\n[pipeline]\nmax_staleness = {staleness}\nstream_teacher = {str(staleness == 1).lower()}\n"
    config.write_text(override_sections(smoke_config(tmp_path).read_text(), overrides) + pipeline)
    settings = load_settings(config)
    assert (settings.learner.checkpoint_every, settings.learner.max_restarts) == (EVERY, 3)
    assert settings.pipeline.max_staleness == staleness and not settings.controller.resolved_redis_url()
    run = Path(settings.run.run_dir)
    rng = random.Random(SEED * 10 + staleness)
    me = os.getpid()  # the run's processes are below this test's (its Ray cluster, the driver)
    killed: dict[str, int] = {}
    kills: list[threading.Thread] = []

    driver = cli_process("train", "--config", str(config))

    def kill(name: str, delay: float, after: threading.Thread | None) -> None:
        if after is not None:  # in order: the driver after the replica
            after.join()
        time.sleep(delay)
        killed[name] = driver.pid if name == "driver" else run_process(name, run, within=me)
        os.kill(killed[name], signal.SIGKILL)

    lines = Lines(run / "metrics.jsonl")
    deadline = time.monotonic() + 600
    while "driver" not in killed:
        assert driver.poll() is None, driver.communicate()[0][-3000:]
        assert time.monotonic() < deadline, f"the run did not reach its last step in 600 s: {killed}"
        lines.poll()
        reached = max((m.step for m in lines.seen), default=0)
        if reached in VICTIMS and len(kills) < reached:
            step_s = next(m for m in lines.seen if m.step == reached).times.total_s
            delay = round(rng.uniform(0.0, min(step_s, 4.0) * (0.8 if reached == 7 else 1.0)), 2)
            print(
                f"seed {SEED}, staleness {staleness}: SIGKILL {VICTIMS[reached]} at step {reached} + {delay:.2f} s"
            )
            after = kills[-1] if kills else None
            kills.append(threading.Thread(target=kill, args=(VICTIMS[reached], delay, after), daemon=True))
            kills[-1].start()
        time.sleep(0.1)
    first_sitting, _ = driver.communicate(timeout=60)
    assert driver.returncode == -signal.SIGKILL, first_sitting[-3000:]  # killed, not finished
    for thread in kills:
        thread.join(timeout=60)
    assert set(killed) == set(VICTIMS.values()), killed
    lines.poll()
    before = {m.step: m for m in lines.logged()}
    assert max(before) >= STEPS - 1, sorted(before)
    logs = "".join(path.read_text(errors="replace") for path in run.glob("env_gateway*.log"))
    assert "replacing env worker slot" in logs  # the gateway saw its worker die and replaced it
    restarts = {r.request_id: r for r in read_jsonl(run / RESTARTS_FILE, RestartResult)}
    assert set(restarts) == {"watchdog-redis-1", "watchdog-env-gateway-2", "learner-lost-1"}, restarts
    assert all(r.ok for r in restarts.values())
    assert "redis-server restarted on port" in restarts["watchdog-redis-1"].message
    assert "env gateway replaced" in restarts["watchdog-env-gateway-2"].message
    lost = restarts["learner-lost-1"]
    checkpoint = lost.step  # the latest checkpoint of a logged step when the learner went
    assert lost.service == "learner" and checkpoint in (2, 4, 6)
    # the steps after that checkpoint were played again, once each, and only those
    replayed = [m.step for m in lines.seen]
    again = [i for i in range(1, len(replayed)) if replayed[i] <= replayed[i - 1]]
    again_from = again[0] if again else len(replayed)
    assert len(again) <= 1, replayed
    if again:
        assert replayed[again_from] == checkpoint + 1
        assert replayed[:again_from] == list(range(1, replayed[again_from - 1] + 1))
        assert replayed[again_from:] == list(range(checkpoint + 1, max(before) + 1))
    else:  # the learner went right after its checkpoint's step was logged: nothing to play again
        assert replayed == list(range(1, max(before) + 1))
    if staleness == 0:  # the same batches on the same weights: each step again as it was
        first = {m.step: m for m in lines.seen[:again_from]}
        for m in lines.seen[again_from:]:
            if m.step in first:
                assert (m.tokens, m.trajectories) == (first[m.step].tokens, first[m.step].trajectories)
                assert m.loss == pytest.approx(first[m.step].loss, rel=1e-3)

    saved = [p.name.removeprefix("step_") for p in (run / "checkpoints").glob("step_*")]
    resumed_from = max((int(n) for n in saved if n.isdigit() and int(n) <= max(before)), default=0)
    assert len(redis_servers(run)) == 1  # the killed driver's server lives on, orphaned
    resumed = cli_process("train", "--resume", str(run))
    said, _ = resumed.communicate(timeout=900)
    assert resumed.returncode == 0, said[-3000:]
    assert "still serves" in said  # the resumed run found the orphan redis-server and stopped it
    metrics = lines.logged()
    assert [m.step for m in metrics] == list(range(1, STEPS + 1))  # every step once
    assert [m.weights_version for m in metrics] == list(range(1, STEPS + 1))
    assert all(m.failed_episodes == 0 for m in metrics)  # the deaths lost no episode
    redone = max(before) - resumed_from
    assert 0 <= redone <= EVERY - 1, (sorted(before), saved)
    kept = {m.step: m for m in metrics}
    for step in range(1, resumed_from + 1):  # before the checkpoint: the lines the killed run wrote
        assert kept[step] == before[step]
    if staleness == 0:  # trained again on the same weights with the same seeds: the same step
        for step in range(resumed_from + 1, max(before) + 1):
            assert (kept[step].tokens, kept[step].trajectories) == (
                before[step].tokens,
                before[step].trajectories,
            )
            assert kept[step].loss == pytest.approx(before[step].loss, rel=1e-3)
    assert_decisions_equal_replay(run, STEPS, settings.depth, lag=staleness)
    assert latest_checkpoint(run).name == f"step_{STEPS:06d}"
    assert redis_servers(run) == []  # the orphan was stopped, the resumed run's own with its end
    plan = json.loads((run / "plan.json").read_text())  # rewritten after each restart and the resume
    assert plan["driver"]["step_loop"]["staleness"] == staleness
    assert plan["services"]["learner"]["learner"]["max_restarts"] == 3
