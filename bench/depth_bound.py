"""What rollout-depth schedules could save on the frontier's task, replayed on vanilla's own episodes.

Reads a frontier's records (``bench/frontier.py --records DIR``):

- It fits the step-cost model over every run's steps (``services/experiments/step_cost.py``: a run's
  speed factor x (a x tokens + b x tokens^2 / episodes)).
- It takes each vanilla run that kept its ``turn_stats.jsonl`` (every episode's tokens per turn,
  played to the turn cap).
- It replays depth schedules on those episodes (``services/experiments/depth_bound.py``): cutting
  an episode at H turns leaves its first H turns as they were.

For each schedule it prints vanilla's first k steps over the schedule's at one machine speed, and
the share of successful episodes the caps keep. That ratio is the time ratio a schedule reaches
when it learns per step as vanilla does. The schedules:

- each TurnOPD run's caps as it played them;
- the same probes and controller targets without the EMA's lag (``ema_alpha`` 1);
- fixed caps on every step but Algorithm 1's probes (the config's ``warmup_steps`` and
  ``probe_interval``);
- fixed caps on every step, with no probes at all (no schedule of one cap cuts deeper).

    PYTHONPATH=$PWD python bench/depth_bound.py [--records docs/results/records/frontier-2026-11-29]
        [--ks 8,16,20,32] [--caps 16,20,24,28]
"""

import argparse
import sys
from pathlib import Path

from services.contracts.jsonl import read_jsonl
from services.contracts.records import TurnStatsRecord
from services.errors import TurnOPDError
from services.experiments.compare_dir import load_run, run_dirs_under, saved_settings
from services.experiments.depth_bound import (
    Replay,
    Schedule,
    as_run,
    fixed_cap,
    probe_steps,
    replay,
    without_lag,
)
from services.experiments.protocols import BASELINE, TURNOPD
from services.experiments.step_cost import fit_step_cost
from services.experiments.tables import Table
from services.run_dir import TURN_STATS_FILE, RunDir

DEFAULT_RECORDS = Path("docs/results/records/frontier-2026-11-29")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--records", type=Path, default=DEFAULT_RECORDS, help="a frontier's records (or its run folder)"
    )
    p.add_argument("--ks", default="8,16,20,32", help="cumulative steps to compare at")
    p.add_argument("--caps", default="16,20,24,28", help="fixed depth caps to replay")
    return p.parse_args()


def ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        sys.exit(f"{what} takes whole numbers separated by commas, got {text!r}")
    if not values or any(v < 1 for v in values):
        sys.exit(f"{what} takes whole numbers >= 1, got {text!r}")
    return values


def table(run: str, replays: list[Replay], ks: list[int]) -> Table:
    rows = [
        [
            r.schedule,
            *(f"{r.ratios[k]:.2f}" if k in r.ratios else "-" for k in ks),
            "-" if r.successes_kept is None else f"{100 * r.successes_kept:.0f}%",
        ]
        for r in replays
    ]
    return Table(
        title=f"Depth schedules replayed on {run}'s episodes",
        header=["Schedule", *(f"first {k} steps" for k in ks), "successes kept"],
        rows=rows,
        note="vanilla's steps over the schedule's at one machine speed; successes kept: the run's "
        "successful episodes that end within their step's cap.",
    )


def main() -> None:
    args = parse_args()
    ks = ints(args.ks, "--ks")
    caps = ints(args.caps, "--caps")
    try:
        runs = [load_run(p) for p in run_dirs_under(args.records)]
        model = fit_step_cost({(r.method, r.seed): r.metrics for r in runs})
        turnopd = [r for r in runs if r.method == TURNOPD]
        full = [r for r in runs if r.method == BASELINE and (Path(r.run_dir) / TURN_STATS_FILE).is_file()]
        if not turnopd or not full:
            sys.exit(
                f"depth_bound: {args.records} needs TurnOPD runs and a vanilla run with its {TURN_STATS_FILE}"
            )
        depth = saved_settings(RunDir(Path(turnopd[0].run_dir)).saved_config()).depth
        print(
            f"step cost at one speed: {model.a:.2f} s per 1k tokens + {model.b:.3f} s per (1k tokens)^2 / "
            f"episodes (R^2 {model.r2:.3f} over {model.steps} steps); probes: warm-up {depth.warmup_steps}, "
            f"every {depth.probe_interval}th step; caps {depth.min}..{depth.max}\n"
        )
        for run in full:
            records = read_jsonl(Path(run.run_dir) / TURN_STATS_FILE, TurnStatsRecord)
            probes = probe_steps(len(records), depth.warmup_steps, depth.probe_interval)
            schedules: list[Schedule] = []
            for t in sorted(turnopd, key=lambda r: r.seed):
                schedules.append(as_run(f"TurnOPD seed {t.seed} as it ran", t.metrics))
                schedules.append(
                    without_lag(f"TurnOPD seed {t.seed}, no EMA lag", t.metrics, depth.min, depth.max)
                )
            schedules += [fixed_cap(f"{c} turns, with the probes", c, depth.max, probes) for c in caps]
            schedules += [
                fixed_cap(f"{c} turns, no probes", c, depth.max, [False] * len(records)) for c in caps
            ]
            replays = [replay(model, records, s, ks) for s in schedules]
            print(table(f"vanilla seed {run.seed}", replays, ks).markdown())
    except TurnOPDError as exc:
        sys.exit(f"depth_bound: {exc}")


if __name__ == "__main__":
    main()
