"""Trials of `turnopd restart controller` at a random moment of a pipelined run (issue 33).

Each trial starts the run's Redis and controller services (``RedisOps``, ``ControllerOps``: real
redis-server, real Ray actor) and drives them as the step pipeline does at ``[pipeline]
max_staleness = 1``: a rollout lane plans step j once step j-2 is ingested and "plays" it, a learner
lane ingests each step after its "update"; both call the controller through the run's
``ControllerClient``. At a seeded random moment another thread runs ``ControllerOps.replace`` (what
the driver's restart loop does for `turnopd restart controller`). A trial completes when every
step is ingested once; it then checks the decisions against an independent replay of the probes.

    PYTHONPATH=$PWD python bench/controller_restart_trials.py --trials 20

Run it from a checkout of the old code (``PYTHONPATH=<old checkout>``) for the "before" figure.
"""

import argparse
import gc
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import fields
from pathlib import Path

import ray

from services.contracts.controller import ProbeStats
from services.controller.replay import replay
from services.operations.controller_ops import ControllerOps
from services.operations.managed_service import Change, RunContext
from services.operations.redis_ops import RedisOps
from services.operations.run_pieces import RunPieces
from services.run_dir import RunDir
from services.settings import TurnOPDSettings

LAG = 1


def run_settings(steps: int) -> TurnOPDSettings:
    s = TurnOPDSettings()
    s.optim.steps = steps
    s.depth.max = s.rollout.max_turns = 12
    s.depth.probe_interval, s.depth.warmup_steps, s.depth.min_cov_traj = 3, 2, 2
    return s


def stats_for(k: int) -> ProbeStats:
    depth = 3 + k % 4
    kl = [1.0 / (t + 1 + k) for t in range(depth)]
    return ProbeStats(step=k, kl_per_turn=kl, survivors=[6] * depth, success_turns=[depth - 1, 1])


def context(settings: TurnOPDSettings, root: Path) -> RunContext:
    run = RunDir(root)
    run.create(settings)
    extra = {"config_file": None} if "config_file" in {f.name for f in fields(RunContext)} else {}
    return RunContext(pieces=RunPieces.of(settings), run=run, run_id=root.name, **extra)


def trial(seed: int, steps: int, work_s: float, timeout_s: float, root: Path) -> dict[str, object]:
    settings = run_settings(steps)
    ctx = context(settings, root)
    counts: Counter[str] = Counter()
    redis = RedisOps(ctx, counts)
    redis.start()
    ops = ControllerOps(ctx, counts, redis)
    ops.start()
    client = ops.client
    assert client is not None
    client._timeout_s = timeout_s  # a lost controller shows within the trial, not after 300 s
    done, plans, failure = [0], {}, []
    changed = threading.Condition()
    restart_at = random.Random(seed).uniform(0.2, steps * work_s)
    restart_result: list[str] = []

    def restart() -> None:
        time.sleep(restart_at)
        try:
            restart_result.append(ops.replace(Change(), done[0]))
        except Exception as exc:
            restart_result.append(f"failed: {exc}")

    def rollout_lane() -> None:
        try:
            for j in range(1, steps + 1):
                with changed:
                    changed.wait_for(lambda j=j: done[0] >= j - 1 - LAG or failure, timeout=timeout_s)
                if failure:
                    return
                plan = client.plan(j, LAG)
                time.sleep(work_s)  # the step's rollout and scoring
                with changed:
                    plans[j] = plan
                    changed.notify_all()
        except Exception as exc:
            with changed:
                failure.append(f"plan: {type(exc).__name__}: {exc}")
                changed.notify_all()

    started = time.monotonic()
    threads = [
        threading.Thread(target=restart, daemon=True),
        threading.Thread(target=rollout_lane, daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        for k in range(1, steps + 1):
            with changed:
                changed.wait_for(lambda k=k: k in plans or failure, timeout=timeout_s)
                if failure or k not in plans:
                    break
                plan = plans[k]
            time.sleep(work_s / 2)  # the learner's update
            client.ingest(k, stats_for(k) if plan.probe else None, LAG)
            gc.collect()  # a controller kept only by a looked-up handle goes at a collection
            with changed:
                done[0] = k
                changed.notify_all()
    except Exception as exc:
        failure.append(f"ingest: {type(exc).__name__}: {exc}")
    for thread in threads:
        thread.join(timeout=timeout_s)
    elapsed = time.monotonic() - started
    try:
        decisions = ray.get(client.handle.decisions.remote(), timeout=30)
        probes = ray.get(client.handle.probes.remote(), timeout=30)
    except Exception as exc:
        decisions, probes = [], {}
        failure.append(f"read: {type(exc).__name__}")
    logged = [d.step for d in decisions]
    equal = bool(decisions) and [(d.h_bar, d.h_hat) for d in decisions] == [
        (d.h_bar, d.h_hat) for d in replay(probes, len(decisions), settings.for_controller().depth, LAG)
    ]
    ops.stop()
    redis.stop()
    return {
        "seed": seed,
        "restart_at_s": round(restart_at, 2),
        "completed": not failure and logged == list(range(1, steps + 1)),
        "lost": len(set(range(1, steps + 1)) - set(logged)),
        "repeated": len(logged) - len(set(logged)),
        "replay_equal": equal,
        "restart": restart_result[0] if restart_result else "not done",
        "failure": failure[0][:160] if failure else "",
        "seconds": round(elapsed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--work-s", type=float, default=0.4, help="a lane's work per step, seconds")
    parser.add_argument("--timeout-s", type=float, default=30.0, help="the client's wait for a controller")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, namespace="turnopd", log_to_driver=False)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.trials):
            r = trial(args.seed + i, args.steps, args.work_s, args.timeout_s, Path(tmp) / f"trial-{i}")
            results.append(r)
            print(
                f"trial {i + 1:2d} seed {r['seed']}: restart at {r['restart_at_s']:.2f} s, "
                f"{'completed' if r['completed'] else 'FAILED'}, lost {r['lost']}, repeated {r['repeated']}, "
                f"replay {'equal' if r['replay_equal'] else 'differs'} ({r['seconds']} s) {r['failure']}",
                flush=True,
            )
    ray.shutdown()
    ok = sum(bool(r["completed"]) and bool(r["replay_equal"]) for r in results)
    lost = sum(int(r["lost"]) for r in results)  # type: ignore[call-overload]
    repeated = sum(int(r["repeated"]) for r in results)  # type: ignore[call-overload]
    print(
        f"\n{ok}/{len(results)} runs completed with the controller equal to its replay; "
        f"steps lost {lost}, repeated {repeated} ({args.steps} steps a run, staleness {LAG})"
    )
    sys.exit(0 if ok == len(results) else 1)


if __name__ == "__main__":
    main()
