"""The paper's accuracy-time frontier: TurnOPD against vanilla OPD over seeds (issue 35 item 4).

Runs (or resumes) ``turnopd compare --methods turnopd,vanilla --seeds N`` from ``--config`` into
``--out``, then writes ``OUT/frontier.png`` (success against cumulative step wall time: the seed
mean of each seed's step function, the min-max band), ``OUT/frontier.md`` and ``OUT/frontier.json``:
Least-Time and Same-Step Avg@n, the time each method first reaches 90% of vanilla's final accuracy
(and the ratio vanilla / TurnOPD; also with every step re-costed at one machine speed,
``services/experiments/step_cost.py``), the best student against the teacher on the same games, 95%
Wilson intervals and game counts (math: ``services/experiments/frontier.py``).

``--system`` adds the system arms (``services/experiments/system_arms.py``): TurnOPD and vanilla
with the pipelined step (``[pipeline] max_staleness = 1``, streamed scoring) under ``OUT/system``
(records under ``RECORDS/system``), named turnopd-system and vanilla-pipelined in the tables, set
against the synchronous vanilla (target: turnopd-system 2.3x to 90% of its final). Their steps
overlap, so the table at one machine speed fits the synchronous arms only.

Interrupt it at any time and rerun the same command: complete runs are reused, a partial one
resumes from its last checkpoint. ``--analyse-only`` scores complete runs without training.
``--records DIR`` keeps each complete run's config and logs (no checkpoints, tens of KB) under DIR
and takes complete runs from there instead of training them again, so the runs can be spread over
machines that share no disk (``services/experiments/run_records.py``).

    PYTHONPATH=$PWD python bench/frontier.py [--config configs/frontier.toml] [--out runs/frontier]
        [--seeds 3] [--steps K] [--records DIR] [--teacher-success RATE [--teacher-episodes N]]
        [--system] [--analyse-only]
"""

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.errors import TurnOPDError
from services.experiments.compare_dir import load_run, write_atomic
from services.experiments.compare_plan import PlannedRun, parse_methods, plan_runs
from services.experiments.compare_runner import write_summary
from services.experiments.figures import frontier_band_figure
from services.experiments.frontier import MethodFrontier, frontiers, reach_threshold
from services.experiments.frontier_page import (
    FrontierReport,
    Teacher,
    frontier_json,
    frontier_markdown,
    games_of,
)
from services.experiments.frontier_runs import learner_ms_per_token
from services.experiments.protocols import RunLogs, summarise
from services.experiments.run_records import restore_records, save_records
from services.experiments.step_cost import OneSpeed, one_speed
from services.experiments.step_kinds import step_kinds
from services.experiments.system_arms import SYSTEM_DIR, SYSTEM_OVERRIDES, as_system_arms
from services.orchestrator.run_result import Score, comparable_measurement

METHODS = "turnopd,vanilla"
DEFAULT_CONFIG = Path("configs/frontier.toml")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="run config shared by every run")
    p.add_argument("--out", type=Path, default=Path("runs/frontier"), help="comparison directory")
    p.add_argument("--seeds", type=int, default=3, help="seeds per method (run.seed, run.seed+1, ...)")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps per run (config: optim.steps)")
    p.add_argument(
        "--teacher-success", type=float, default=None, help="the teacher's success on the runs' games"
    )
    p.add_argument("--teacher-episodes", type=int, default=None, help="episodes behind --teacher-success")
    p.add_argument(
        "--records", type=Path, default=None, help="keep complete runs' logs here, and reuse those kept"
    )
    p.add_argument(
        "--system",
        action="store_true",
        help="also run TurnOPD and vanilla with the pipelined step (OUT/system), against the synchronous arms",
    )
    p.add_argument("--analyse-only", action="store_true", help="score complete runs; train nothing")
    return p.parse_args()


def teacher_success(args: argparse.Namespace, run: PlannedRun, episodes: int) -> Teacher:
    """--teacher-success, else the teacher's shipped manifest when measured on the runs' games."""
    from services.cli.result_view import eval_description
    from services.models.registry import resolve_model_dir
    from services.models.shipped import measured_success

    if args.teacher_success is not None:
        count = episodes if args.teacher_episodes is None else args.teacher_episodes
        return Teacher(
            Score("teacher", args.teacher_success, count), f"given by --teacher-success ({count} episodes)"
        )
    settings = run.settings
    try:
        measured = measured_success(resolve_model_dir(settings.models.teacher, settings.models.cache_dir))
    except TurnOPDError as exc:
        return Teacher(None, f"{settings.models.teacher}: {exc}; pass --teacher-success")
    ok, note = comparable_measurement(measured, eval_description(settings))
    if not ok or measured is None:
        return Teacher(None, f"{note}; pass --teacher-success")
    return Teacher(Score("teacher", float(measured["success_rate"]), int(measured["episodes"])), note)


@dataclass(frozen=True)
class Arms:
    """One group of runs: the synchronous arms, or the system arms (``--system``)."""

    out: Path
    records: Path | None
    overrides: dict[str, dict[str, Any]] | None  # None: the config as it is


def arm_groups(args: argparse.Namespace) -> list[Arms]:
    groups = [Arms(args.out, args.records, None)]
    if args.system:
        records = None if args.records is None else args.records / SYSTEM_DIR
        groups.append(Arms(args.out / SYSTEM_DIR, records, SYSTEM_OVERRIDES))
    return groups


def plan(args: argparse.Namespace, arms: Arms) -> list[PlannedRun]:
    """The group's runs, each complete one found in its records brought back first."""
    methods = parse_methods(METHODS)
    planned = plan_runs(args.config, methods, args.seeds, args.steps, arms.out, arms.overrides)
    restored = [] if arms.records is None else restore_records(planned, arms.records)
    if restored:
        names = ", ".join(f"{r.method} seed {r.seed}" for r in restored)
        print(f"frontier: taken from {arms.records}: {names}", file=sys.stderr)
        planned = plan_runs(args.config, methods, args.seeds, args.steps, arms.out, arms.overrides)
    return planned


def train(args: argparse.Namespace, planned: list[PlannedRun], out: Path) -> None:
    todo = [r for r in planned if r.state != "complete"]
    print(f"frontier: {len(planned) - len(todo)}/{len(planned)} runs complete in {out}", file=sys.stderr)
    if not todo:
        return
    if args.analyse_only:
        names = ", ".join(f"{r.method} seed {r.seed} ({r.state})" for r in todo)
        raise TurnOPDError(f"--analyse-only needs complete runs; not complete: {names}")
    from services.cli.compare_cmd import run_comparison  # loads Ray only once a run trains

    run_comparison(planned, out, args.config)


def speed_fit(methods: Mapping[str, MethodFrontier], runs: list[RunLogs]) -> OneSpeed | None:
    """The times to the threshold at one machine speed; None, with the reason on stderr, where the
    steps cannot be fit (too few, or all of one size) or there is no threshold."""
    try:
        return one_speed(methods, {(r.method, r.seed): r.metrics for r in runs})
    except TurnOPDError as exc:
        print(f"frontier: no table at one machine speed: {exc}", file=sys.stderr)
        return None


def keep_records(planned: list[PlannedRun], records: Path) -> str | None:
    """Record the complete runs (``save_records``); what stopped that, if anything (the analysis
    still runs, and a training error still propagates)."""
    try:
        kept = save_records(planned, records)
    except TurnOPDError as exc:
        print(f"frontier: records not saved: {exc}", file=sys.stderr)
        return str(exc)
    print(f"frontier: {len(kept)} complete runs recorded in {records}", file=sys.stderr)
    return None


def main() -> None:
    args = parse_args()
    if args.teacher_episodes is not None and args.teacher_success is None:
        sys.exit("--teacher-episodes counts the episodes behind --teacher-success; give both")
    if args.teacher_episodes is not None and args.teacher_episodes < 1:
        sys.exit(f"--teacher-episodes must be >= 1, got {args.teacher_episodes}")
    if args.teacher_success is not None and not 0.0 <= args.teacher_success <= 1.0:
        sys.exit(f"--teacher-success is a rate in [0, 1], got {args.teacher_success}")
    if not args.config.is_file():
        sys.exit(
            f"config not found: {args.config} (the frontier config is configs/frontier.toml; pass --config)"
        )
    try:
        groups = [(arms, plan(args, arms)) for arms in arm_groups(args)]
        records_errors = []
        for arms, planned in groups:
            try:
                train(args, planned, arms.out)
            finally:
                if arms.records is not None:
                    error = keep_records(planned, arms.records)
                    if error is not None:
                        records_errors.append(error)
        for arms, planned in groups:
            write_summary(planned, arms.out, args.config)  # each group's own summary.json
        runs = [load_run(r.path) for r in groups[0][1]]
        systems = [as_system_arms([load_run(r.path) for r in planned]) for _, planned in groups[1:]]
        every = runs + [r for group in systems for r in group]
        first = groups[0][1][0]
        summary = summarise(every, first.settings.optim.steps, config=str(args.config))
        threshold = reach_threshold(summary.methods["vanilla"].same_step_acc)
        games, n = games_of([(e.episodes, e.n) for r in every for e in r.evals])
        methods = frontiers(every, threshold)
        synchronous = {r.method for r in runs}  # the steps the machine-speed fit models
        report = FrontierReport(
            summary=summary,
            methods=methods,
            teacher=teacher_success(args, first, games * n),
            games=games,
            n=n,
            learner_ms_per_token={(r.method, r.seed): learner_ms_per_token(r.metrics) for r in every},
            step_kinds={(r.method, r.seed): step_kinds(r.metrics) for r in every},
            one_speed=speed_fit({m: f for m, f in methods.items() if m in synchronous}, runs),
        )
    except TurnOPDError as exc:
        sys.exit(f"frontier: {exc}")
    figure = frontier_band_figure(
        [f.band for f in report.methods.values()],
        [c for f in report.methods.values() for c in f.curves],
        report.threshold,
        None if report.teacher.score is None else report.teacher.score.rate,
        args.out / "frontier.png",
    )
    page = frontier_markdown(report, figure.name)
    write_atomic(args.out / "frontier.md", page)
    write_atomic(args.out / "frontier.json", json.dumps(frontier_json(report), indent=2) + "\n")
    print(page)
    print(f"written: {figure}, {args.out / 'frontier.md'}, {args.out / 'frontier.json'}", file=sys.stderr)
    if records_errors:
        sys.exit(
            f"frontier: the analysis is written, but the records were not saved: {'; '.join(records_errors)}"
        )


if __name__ == "__main__":
    main()
