"""Steps per hour of the synchronous step against the overlapped pipeline, on one config.

Two modes train the same config and seed for N steps, each in a fresh run (and Ray session), the
modes alternating for ``--rounds`` rounds so a slow spell of the machine hits both:

* synchronous: ``[pipeline] max_staleness = 0``, ``stream_teacher = false`` (the paper's protocol);
* overlapped: ``max_staleness = 1`` (the rollouts of step k+1 play while the learner trains step
  k) with ``stream_teacher = true`` (each rollout chunk scored as it arrives).

For every run it prints steps per hour over steps 2..N (step 1's warm-up and the evaluation after
the last step left out), each pool's busy share of the step time and the share with two or more
busy at once (``metrics.jsonl``), and the machine's CPU utilisation between the ends of step 1
and step N (``/proc/stat``, all cores, any process). Then the mean of each mode, their ratio,
and the separate-machines model on the synchronous steps (``services/orchestrator/throughput.py``):

    T_sep = max(rollout busy, teacher busy, learner busy) + other     (means per step)

i.e. with each pool on hardware of its own and the pipeline keeping all of them busy on different
steps, a step takes as long as its busiest pool plus the driver's serial part that no pool can
overlap (plans, ingests, publishing weights, logging); its speed-up is T_sync / T_sep.

``--compare-vanilla`` instead trains TurnOPD overlapped (s = 1, streamed) against vanilla OPD
synchronous (s = 0) for 16 steps and prints their wall times: the sum of the step times
(``cumulative_s``, the paper's measure) and the wall time over steps 2..N.

    PYTHONPATH=$PWD python bench/pipeline_modes.py [--config configs/demo.toml] [--steps 6] [--rounds 2]
    PYTHONPATH=$PWD python bench/pipeline_modes.py --compare-vanilla [--eval] [--config configs/demo.toml]
    PYTHONPATH=$PWD python bench/pipeline_modes.py --compare-kernels [--steps 6] [--rounds 1]
    PYTHONPATH=$PWD python bench/pipeline_modes.py --compare-threads [--steps 5] [--rounds 2]

``--compare-kernels`` trains synchronous steps with the rollout engine's compiled decode kernels
(``[models] native_kernels``, the default) and without them (torch's ops), alternating, and prints
the rollout's share of the step time (``rollout_s / total_s`` of steps 2..N) and each pool's
seconds per step for both (issue 34's "rollout share of a demo step").

``--compare-threads`` trains synchronous steps with Ray's torch threads for the teacher and the
learner (one each for a share under one CPU) and with ``[teacher] threads`` and ``[learner]
threads_per_worker`` at the machine's CPU count, alternating, and prints the same table: in a
synchronous step the two run while the rollouts wait, so they can have every core.

``--eval`` also evaluates each run after its last step as the config says (untimed), so the
student's success under s = 1 can be set beside the synchronous run's.
"""

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import EvalRecord, PoolLoad, StepMetrics
from services.operations.pool_load import POOLS, pool_load
from services.orchestrator.pipeline import train
from services.orchestrator.run_result import wilson_interval
from services.orchestrator.throughput import (
    CpuTimes,
    cpu_times,
    cpu_utilisation,
    separate_machines,
    steps_per_hour,
)
from services.run_dir import RunDir
from services.settings import load_settings


@dataclass(frozen=True)
class Mode:
    name: str
    method: str | None  # None: the config's own
    staleness: int
    stream_teacher: bool
    native_kernels: bool = True  # [models] native_kernels: the rollout's compiled decode kernels
    threads: int | None = None  # [teacher] threads and [learner] threads_per_worker (None: Ray's)


SYNCHRONOUS = Mode("synchronous", None, 0, False)
OVERLAPPED = Mode("streamed + s=1", None, 1, True)
TURNOPD_OVERLAPPED = Mode("TurnOPD, streamed + s=1", "turnopd", 1, True)
VANILLA_SYNCHRONOUS = Mode("vanilla OPD, synchronous", "vanilla", 0, False)
SYNCHRONOUS_TORCH_OPS = Mode("synchronous, torch ops", None, 0, False, native_kernels=False)
CORES = os.cpu_count() or 1
SYNCHRONOUS_ALL_CORES = Mode(f"synchronous, {CORES} threads", None, 0, False, threads=CORES)


@dataclass(frozen=True)
class Measured:
    mode: Mode
    metrics: list[StepMetrics]
    steps_per_hour: float
    wall_s: float  # steps 2..N
    cpu: float  # utilisation between the ends of steps 1 and N
    load: PoolLoad | None  # steps 2..N
    evaluation: EvalRecord | None = None  # after the last step (--eval)


def read_cpu() -> CpuTimes:
    return cpu_times(Path("/proc/stat").read_text())


def run_mode(config: Path, mode: Mode, steps: int, root: Path, final_eval: bool = False) -> Measured:
    """Train ``config`` for ``steps`` steps in ``mode``; measure it. ``final_eval``: evaluate after
    the last step as the config says (never before step 1); the evaluation is outside every timing."""
    overrides: dict[str, dict[str, Any]] = {
        "run": {"run_dir": root, **({"method": mode.method} if mode.method else {})},
        "optim": {"steps": steps},
        # a run always evaluates after its last step: without --eval, on one game only (untimed anyway)
        "eval": {"interval": steps, "at_start": False, **({} if final_eval else {"episodes": 1})},
        "metrics": {"enabled": False},
        "pipeline": {"max_staleness": mode.staleness, "stream_teacher": mode.stream_teacher},
        "models": {"native_kernels": mode.native_kernels},
        "teacher": {"threads": mode.threads},
        "learner": {"checkpoint_every": 1_000_000, "threads_per_worker": mode.threads},
    }
    settings = load_settings(config, overrides)
    run = RunDir(root)
    run.create(settings)
    ends: list[float] = []
    cpu: list[CpuTimes] = []

    def on_step(m: StepMetrics) -> None:
        ends.append(time.perf_counter())
        cpu.append(read_cpu())
        print(f"  {mode.name}: step {m.step}/{steps} in {m.times.total_s:.1f} s", flush=True)

    evals: list[EvalRecord] = []
    train(settings, run, on_step, evals.append)
    metrics = read_jsonl(run.path("metrics.jsonl"), StepMetrics)
    return Measured(
        evaluation=evals[-1] if evals else None,
        mode=mode,
        metrics=metrics,
        steps_per_hour=steps_per_hour(ends),
        wall_s=ends[-1] - ends[0],
        cpu=cpu_utilisation(cpu[0], cpu[-1]),
        load=pool_load([m.times for m in metrics[1:]]),
    )


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def print_runs(runs: list[Measured]) -> None:
    head = f"{'mode':<26} {'steps/h':>8} {'wall s':>8} " + " ".join(f"{p:>8}" for p in POOLS)
    print(head + f" {'2+ busy':>8} {'CPU':>6}")
    for r in runs:
        busy = [pct(r.load.busy[p]) if r.load else "-" for p in POOLS]
        overlap = pct(r.load.overlap) if r.load else "-"
        line = f"{r.mode.name:<26} {r.steps_per_hour:>8.1f} {r.wall_s:>8.0f} " + " ".join(
            f"{b:>8}" for b in busy
        )
        print(line + f" {overlap:>8} {pct(r.cpu):>6}")


def mean_of(runs: list[Measured], mode: Mode) -> tuple[float, float]:
    """Mean steps per hour and mean CPU utilisation of ``mode``'s runs."""
    mine = [r for r in runs if r.mode == mode]
    return statistics.mean(r.steps_per_hour for r in mine), statistics.mean(r.cpu for r in mine)


def alternate(
    config: Path, modes: tuple[Mode, ...], steps: int, rounds: int, tmp: Path, final_eval: bool = False
) -> list[Measured]:
    """``rounds`` runs of each mode, the modes alternating, each in a directory of its own."""
    return [
        run_mode(config, mode, steps, tmp / f"{i}-{m}", final_eval)
        for i in range(rounds)
        for m, mode in enumerate(modes)
    ]


def after_first(runs: list[Measured], mode: Mode) -> list[StepMetrics]:
    """The metrics of ``mode``'s steps 2..N over its runs (step 1 warms up)."""
    return [m for r in runs if r.mode == mode for m in r.metrics[1:]]


def compare_modes(config: Path, steps: int, rounds: int, tmp: Path) -> None:
    runs = alternate(config, (SYNCHRONOUS, OVERLAPPED), steps, rounds, tmp)
    print(f"\n{config}, {steps} steps per run, modes alternating, {rounds} round(s):")
    print_runs(runs)
    sync, sync_cpu = mean_of(runs, SYNCHRONOUS)
    over, over_cpu = mean_of(runs, OVERLAPPED)
    print(f"\nsynchronous: {sync:.1f} steps/h, CPU {pct(sync_cpu)}")
    print(f"streamed + s=1: {over:.1f} steps/h, CPU {pct(over_cpu)}")
    print(f"ratio streamed + s=1 / synchronous: {over / sync:.2f}x")
    model = separate_machines(after_first(runs, SYNCHRONOUS))
    busy = ", ".join(f"{p} {model.busy[p]:.1f} s" for p in POOLS)
    print(
        "\nseparate machines (model: T_sep = max(rollout, teacher, learner busy) + other, on the "
        "synchronous steps):"
    )
    print(f"  per step: {busy}, other {model.other_s:.1f} s; measured T_sync {model.step_s:.1f} s")
    print(f"  T_sep {model.model_step_s:.1f} s: {model.speedup:.2f}x the synchronous step")


def compare_synchronous(config: Path, modes: tuple[Mode, Mode], steps: int, rounds: int, tmp: Path) -> None:
    """Two synchronous modes, alternating: each pool's seconds per step, the rollout's share of the
    step time, and the second mode's steps per hour over the first's."""
    runs = alternate(config, modes, steps, rounds, tmp)
    print(f"\n{config}, {steps} steps per run, synchronous, {rounds} round(s):")
    print_runs(runs)
    print(f"\n{'mode':<26} {'step s':>8} " + " ".join(f"{p + ' s':>10}" for p in POOLS) + "  rollout share")
    for mode in modes:
        model = separate_machines(after_first(runs, mode))
        share = statistics.mean(m.times.rollout_s / m.times.total_s for m in after_first(runs, mode))
        print(
            f"{mode.name:<26} {model.step_s:>8.1f} "
            + " ".join(f"{model.busy[p]:>10.1f}" for p in POOLS)
            + f"  {100 * share:.1f}%"
        )
    first, second = (mean_of(runs, mode)[0] for mode in modes)
    print(f"\nsteps per hour, {modes[1].name} / {modes[0].name}: {second / first:.2f}x")


def compare_vanilla(config: Path, steps: int, rounds: int, tmp: Path, final_eval: bool) -> None:
    runs = alternate(config, (TURNOPD_OVERLAPPED, VANILLA_SYNCHRONOUS), steps, rounds, tmp, final_eval)
    print(f"\n{config}, {steps} steps per run, {rounds} round(s):")
    print_runs(runs)
    print(f"\n{'mode':<26} {'sum of step times s':>20} {'wall s, steps 2..N':>20}")
    for r in runs:
        print(f"{r.mode.name:<26} {r.metrics[-1].cumulative_s:>20.0f} {r.wall_s:>20.0f}")

    def mean(mode: Mode, of: str) -> float:
        values = [r.metrics[-1].cumulative_s if of == "sum" else r.wall_s for r in runs if r.mode == mode]
        return statistics.mean(values)

    for r in runs:
        if r.evaluation is not None:
            e = r.evaluation
            low, high = wilson_interval(round(e.success_rate * e.episodes * e.n), e.episodes * e.n)
            print(
                f"{r.mode.name}: success after step {e.step} {100 * e.success_rate:.1f}% on "
                f"{e.episodes} x {e.n} {e.split} episodes (95% Wilson {100 * low:.1f}-{100 * high:.1f}%)"
            )
    for of, label in (("sum", "sum of step times"), ("wall", "wall time over steps 2..N")):
        ratio = mean(VANILLA_SYNCHRONOUS, of) / mean(TURNOPD_OVERLAPPED, of)
        print(f"vanilla OPD / TurnOPD (s=1), {label}: {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, default=Path("configs/demo.toml"))
    parser.add_argument(
        "--steps", type=int, default=None, help="Steps per run (default 6; 16 with --compare-vanilla)."
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="Runs of each mode (default 2; 1 with --compare-vanilla)."
    )
    compare = parser.add_mutually_exclusive_group()
    compare.add_argument(
        "--compare-vanilla", action="store_true", help="TurnOPD s=1 against vanilla OPD s=0."
    )
    compare.add_argument(
        "--compare-kernels",
        action="store_true",
        help="Synchronous steps with the rollout's compiled decode kernels against torch's ops.",
    )
    compare.add_argument(
        "--compare-threads",
        action="store_true",
        help="Synchronous steps with Ray's torch threads for the teacher and the learner against every core.",
    )
    parser.add_argument(
        "--eval",
        action="store_true",
        help="With --compare-vanilla: evaluate each run after its last step as the config says (untimed).",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="Keep the runs' directories (metrics.jsonl, eval.jsonl, ...) under this new folder "
        "instead of a temporary one.",
    )
    args = parser.parse_args()
    steps = args.steps or (16 if args.compare_vanilla else 6)
    rounds = args.rounds or (1 if args.compare_vanilla else 2)
    if steps < 3:
        parser.error("--steps must be at least 3 (steps per hour leave out step 1)")
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: the folder is not empty; name a new one")
    with tempfile.TemporaryDirectory(prefix="turnopd-bench-pipeline-") as tmp:
        root = args.keep if args.keep is not None else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        if args.compare_vanilla:
            compare_vanilla(args.config, steps, rounds, root, args.eval)
        elif args.compare_kernels:
            compare_synchronous(args.config, (SYNCHRONOUS_TORCH_OPS, SYNCHRONOUS), steps, rounds, root)
        elif args.compare_threads:
            compare_synchronous(args.config, (SYNCHRONOUS, SYNCHRONOUS_ALL_CORES), steps, rounds, root)
        else:
            compare_modes(args.config, steps, rounds, root)


if __name__ == "__main__":
    main()
