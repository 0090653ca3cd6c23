"""Reproduce the first K steps of recorded runs and compare them field by field (issue 62: the
driver's results at s = 0 stay what they were).

Each ``--record DIR`` is one run's record (``config.json``, ``metrics.jsonl``, ``eval.jsonl``, as
``bench/frontier.py --records`` keeps them, e.g. ``docs/results/records/frontier-2026-11-29/turnopd/seed0``).
Its config is trained again, unchanged but for where the run lives, into ``OUT/<method>-seed<s>``,
and the sitting stops after step ``--steps`` (``pipeline.train``'s ``stop_after``: the run stays the
record's K-step run, whose blend schedule reads k / K, so K is not changed; ``--steps`` must be one
the record's learner checkpoints, a multiple of ``[learner] checkpoint_every``); then every step's
controller state, batch, loss, KL, gradient norm and success, and every evaluation, are compared
with the record's (``services/experiments/reproduction.py``).
Times are not compared. Exit status 1 when something differs beyond ``--rel-tol`` (0: exactly).

Rerun the same command to go on: a reproduction whose logs reach step K is compared again without
training, a shorter one resumes from its last checkpoint.

    PYTHONPATH=$PWD python bench/reproduce_records.py --record DIR [--record DIR ...] [--steps 8] \
        [--out runs/reproduce] [--rel-tol 0]
"""

import argparse
import json
import sys
from pathlib import Path

from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.errors import TurnOPDError
from services.experiments.reproduction import differences, largest_relative
from services.experiments.run_start import checked_state, opened
from services.run_dir import CONFIG_FILE, EVAL_FILE, METRICS_FILE
from services.settings import TurnOPDSettings
from services.settings.tree import saved_settings_dict


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--record", type=Path, action="append", required=True, help="a recorded run's directory")
    p.add_argument("--steps", type=int, default=8, help="steps to reproduce (K)")
    p.add_argument("--out", type=Path, default=Path("runs/reproduce"), help="where the reproductions run")
    p.add_argument("--rel-tol", type=float, default=0.0, help="relative tolerance of floats (0: exact)")
    return p.parse_args()


def reproduction_settings(record: Path, out: Path) -> TurnOPDSettings:
    """The record's settings, but for where the run lives."""
    values = saved_settings_dict((record / CONFIG_FILE).read_text(encoding="utf-8"))
    run = values["run"]
    name = f"{run['method']}-seed{run['seed']}"
    values["run"] = {**run, "run_dir": str(out.resolve() / name), "run_id": f"reproduce-{name}"}
    return TurnOPDSettings.model_validate_json(json.dumps(values))


def reproduce(settings: TurnOPDSettings, steps: int) -> None:
    """Train the run's steps up to ``steps`` (new, or resumed from its last checkpoint), unless its
    logs reach that step already."""
    state = checked_state(settings, f"remove it or pass another --out than {settings.run.run_dir.parent}")
    run = opened(settings, state)
    if state != "new" and max(run.steps_logged(METRICS_FILE), default=0) >= steps:
        print(f"{run.root}: step {steps} done, compared again", file=sys.stderr)
        return
    from services.orchestrator.pipeline import train  # Ray loads only when something is trained

    def on_step(m: StepMetrics) -> None:
        print(f"  {run.root.name}: step {m.step}/{steps} in {m.times.total_s:.1f} s", flush=True)

    train(settings, run, on_step, lambda _: None, stop_after=steps)


def main() -> None:
    args = parse_args()
    if args.steps < 1:
        sys.exit(f"--steps must be >= 1, got {args.steps}")
    failed = False
    try:
        for record in args.record:
            if not (record / CONFIG_FILE).is_file():
                sys.exit(f"--record {record}: not a run record (no {CONFIG_FILE})")
            settings = reproduction_settings(record, args.out)
            reproduce(settings, args.steps)
            mine = Path(settings.run.run_dir)
            diffs = differences(
                (read_jsonl(record / METRICS_FILE, StepMetrics), read_jsonl(record / EVAL_FILE, EvalRecord)),
                (read_jsonl(mine / METRICS_FILE, StepMetrics), read_jsonl(mine / EVAL_FILE, EvalRecord)),
                args.steps,
                args.rel_tol,
            )
            evals = sorted(
                {e.step for e in read_jsonl(record / EVAL_FILE, EvalRecord) if e.step <= args.steps}
            )
            print(f"\n{record} -> {mine}: steps 1..{args.steps}, evaluations at {evals}")
            if not diffs:
                print(
                    "  every compared field equal"
                    + (" (exactly)" if args.rel_tol == 0 else f" within {args.rel_tol}")
                )
                continue
            failed = True
            for d in diffs:
                print(
                    f"  {d.file} step {d.step} {d.field}: recorded {d.recorded!r}, reproduced {d.reproduced!r}"
                )
            for field, rel in sorted(largest_relative(diffs).items()):
                print(f"  largest relative difference of {field}: {rel:.3g}")
    except (TurnOPDError, ValueError) as exc:
        sys.exit(f"reproduce_records: {exc}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
