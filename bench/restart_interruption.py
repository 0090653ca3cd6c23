"""Seconds of training throughput each `turnopd restart` costs, against the same run without restarts.

Two trainings of one config and seed run back to back in one Ray session: a baseline, then a
run in which each service is restarted once through ``run_client.submit_restart`` (what
`turnopd restart` calls), plus one SIGKILL of a rollout worker, one action at a time with a
clean step between them. Training is deterministic (same seeds and weights, so step k does the
same work in both runs; the table's last line checks the losses agree), so for each action

    lost_s = sum over the steps its window overlaps of (interval_chaos(k) - interval_base(k))

where interval(k) is the wall time between the completions of steps k-1 and k (it includes a
learner swap at a step boundary) and the window runs from the restart's start to its end (for
the SIGKILL: the step it landed in). ``noise`` is the median |difference| on untouched steps.

    PYTHONPATH=$PWD python bench/restart_interruption.py [--config configs/smoke.toml] [--steps 18]
"""

import argparse
import os
import signal
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import ray

from services.contracts.jsonl import read_jsonl
from services.contracts.operations import WorkerHealth
from services.contracts.orchestrator import StepMetrics
from services.operations.run_client import restart_result, submit_restart
from services.orchestrator.interruption import intervals, lost_seconds, overlapped_steps
from services.orchestrator.pipeline import train
from services.run_dir import RunDir
from services.settings import load_settings
from services.settings.tree import TurnOPDSettings

ACTIONS = (
    "rollout-worker-0",
    "SIGKILL rollout-worker-1",
    "teacher",
    "env-gateway",
    "controller",
    "redis",
    "learner",
)


@dataclass
class Action:
    name: str
    filed_after: int
    start: float = 0.0  # unix time
    end: float = 0.0
    request_id: str | None = None


def bench_settings(config: Path, steps: int, run_dir: Path) -> TurnOPDSettings:
    return load_settings(
        config,
        {
            "run": {"run_dir": run_dir},
            "optim": {"steps": steps, "batch": 4},
            "eval": {"interval": 1000, "at_start": False},
            "cluster": {"rollout_workers": 2},
            "rollout_worker": {"num_cpus": 0.25},
            "teacher": {"num_cpus": 0.25},
            "learner": {"num_cpus_per_worker": 0.25, "checkpoint_every": 1000},
            "metrics": {"enabled": False},
        },
    )


def sigkill(action: Action) -> None:
    """SIGKILL the worker named by ``action`` one second into the next step (its rollout)."""
    name = action.name.removeprefix("SIGKILL ")
    health: WorkerHealth = ray.get(ray.get_actor(name, namespace="turnopd").health.remote())
    time.sleep(1.0)
    action.start = action.end = time.time()
    os.kill(health.pid, signal.SIGKILL)


def run_once(
    config: Path, steps: int, root: Path, actions: list[Action] | None
) -> tuple[list[float], list[StepMetrics]]:
    """Train once; return the step completion times and the metrics; carry out ``actions`` if given."""
    settings = bench_settings(config, steps, root)
    run = RunDir(root)
    run.create(settings)
    ends: list[float] = []
    queue = list(actions or [])
    busy: list[Action] = []

    def on_step(m: StepMetrics) -> None:
        ends.append(time.time())
        if busy:
            current = busy[0]
            if current.request_id is None:
                busy.clear()
            else:
                result = restart_result(current.request_id)
                if result is not None:
                    current.start, current.end = result.started_at, result.started_at + result.seconds
                    busy.clear()
        if busy or not queue or m.step < queue[0].filed_after:
            return
        action = queue.pop(0)
        action.filed_after = m.step
        busy.append(action)
        if action.name.startswith("SIGKILL "):
            threading.Thread(target=sigkill, args=(action,), daemon=True).start()
        else:
            action.request_id = submit_restart(action.name)
        if queue:
            queue[0].filed_after = max(queue[0].filed_after, m.step + 2)  # a clean step in between

    train(settings, run, on_step, lambda _: None)
    return ends, read_jsonl(run.path("metrics.jsonl"), StepMetrics)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, default=Path("configs/smoke.toml"))
    parser.add_argument("--steps", type=int, default=18)
    args = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, namespace="turnopd", log_to_driver=False)
    with tempfile.TemporaryDirectory(prefix="turnopd-bench-restart-") as tmp:
        base_ends, base_metrics = run_once(args.config, args.steps, Path(tmp) / "base", None)
        actions = [Action(name, filed_after=2) for name in ACTIONS]
        chaos_ends, chaos_metrics = run_once(args.config, args.steps, Path(tmp) / "chaos", actions)
    ray.shutdown()

    base, chaos = intervals(base_ends, 1), intervals(chaos_ends, 1)
    touched: set[int] = set()
    print(f"{'action':<26} {'after step':>10} {'restart s':>10} {'steps':>8} {'lost s':>8}")
    for a in actions:
        if a.end == 0.0:
            print(f"{a.name:<26} {'not done (run too short)':>40}")
            continue
        steps = overlapped_steps(chaos_ends, 1, a.start, a.end)
        touched.update(steps)
        lost = lost_seconds(base, chaos, steps)
        span = f"{steps[0]}-{steps[-1]}" if len(steps) > 1 else str(steps[0]) if steps else "-"
        print(f"{a.name:<26} {a.filed_after:>10} {a.end - a.start:>10.1f} {span:>8} {lost:>8.1f}")
    clean = [abs(chaos[k] - base[k]) for k in base if k not in touched]
    print(f"noise (median |chaos - base| of {len(clean)} untouched steps): {statistics.median(clean):.2f} s; "
          f"median step {statistics.median(base.values()):.2f} s")  # fmt: skip
    same = max(abs(a.loss - b.loss) for a, b in zip(base_metrics, chaos_metrics, strict=True))
    print(f"steps {len(chaos_metrics)}/{args.steps}, max |loss difference| chaos vs base: {same:.2e}")


if __name__ == "__main__":
    main()
