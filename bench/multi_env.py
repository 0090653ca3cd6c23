"""One multi-environment run against each of its sources trained alone (README, "Several environments").

Trains ``--config`` (default ``configs/multi_env.toml``: household games, search and the shop, a
teacher and a depth controller each) for its steps, then, one after another, a run of each source
alone (``services/orchestrator/single_source.py``): the same steps and seed, the source's teacher,
depth, blend, turn cap and observation format, its share of the batch (so the same per-environment
episode budget, and the very tasks it plays in the multi-environment run), evaluated on the same
episodes of its eval split after the last step. Each run is a fresh Ray session on this machine.

It prints, per environment, the success after the last step of the multi-environment student and of
the single-environment one (with 95% Wilson intervals), each controller's H_hat at every step and
its last probe's H_bar and H_eff (does each H_hat settle at its own horizon?), and the wall times:
the whole run (start-up, steps, checkpoints, the evaluation), the sum of the step times, and the
machine's CPU utilisation over the run. The multi-environment run's wall time is set against the
three single runs together.

    PYTHONPATH=$PWD python bench/multi_env.py [--config configs/multi_env.toml] [--steps N] [--keep DIR]

``--json FILE`` also writes the figures as JSON. With ``--keep DIR`` the bench is resumable: run the
same command again and a run already complete in DIR is read, not trained again, and a partial one
continues from its last checkpoint (its wall time then covers only the last sitting, and is marked).
With ``[eval] at_start`` set, the multi-environment run evaluates the starting student on every
source first: the "before" column, and each "after" is checked to lie above it (95% Wilson
intervals apart); the single runs start from the same student, and skip that evaluation.
"""

import argparse
import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.contracts.records import TurnStatsRecord
from services.diagnostics.step_stats import mean_token_kl
from services.experiments.run_start import checked_state, opened
from services.orchestrator.run_result import wilson_interval
from services.orchestrator.single_source import single_source_overrides
from services.orchestrator.throughput import CpuTimes, cpu_times, cpu_utilisation
from services.run_dir import RunDir
from services.settings import load_settings
from services.settings.tree import saved_settings


@dataclass(frozen=True)
class EnvFigures:
    """One environment's figures in one run."""

    env: str
    episodes: int  # training episodes over the run
    success: float  # after the last step, on its eval split
    eval_episodes: int
    before: float | None  # the starting student's, at step 0 (None: not evaluated at step 0)
    h_hat: list[int]  # at every step
    h_bar: float  # at its last probe
    h_eff: int | None  # at its last probe
    kl_turns: int  # the first and last steps' KL are over their first kl_turns turns
    kl_first: float | None  # token-pooled reverse KL to the teacher on step 1's rollouts
    kl_last: float | None  # ... on the last step's rollouts (played with the weights after N - 1 updates)


@dataclass(frozen=True)
class RunFigures:
    name: str
    wall_s: float  # the whole train(): start-up, steps, checkpoints, evaluation
    steps_s: float  # the sum of the step times
    cpu: float  # the machine's CPU utilisation over wall_s
    envs: list[EnvFigures]
    resumed: bool = False  # continued from a checkpoint: wall_s and cpu cover the last sitting only


def merged(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` applied, section by section."""
    out = dict(base)
    for name, value in overrides.items():
        out[name] = {**out[name], **value} if isinstance(value, dict) and name in out else value
    return out


def read_cpu() -> CpuTimes:
    return cpu_times(Path("/proc/stat").read_text())


TIMES_FILE = "bench_times.json"  # under --keep: each finished run's wall time and CPU, by name


def read_times(root: Path) -> dict[str, Any]:
    path = root / TIMES_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def run_once(config: Path, name: str, overrides: dict[str, Any], root: Path) -> RunFigures:
    """Train ``config`` with ``overrides`` in the run ``root / name`` (new, or continued from its last
    checkpoint; a complete one is read, not trained again); its figures."""
    own = {"run": {"run_dir": root / name}, "metrics": {"enabled": False}}
    settings = load_settings(config, merged(overrides, own))
    steps = settings.optim.steps
    state = checked_state(settings, "name a new --keep folder, or run the command it was started with")
    run = opened(settings, state)
    times = read_times(root)
    if state == "complete":
        kept = times.get(name)
        print(f"  {name}: complete in {run.root}, read and not trained again", flush=True)
        if kept is None:  # stopped after its last step, before its time was written
            return run_figures(run, name, float("nan"), float("nan"), resumed=True)
        return run_figures(run, name, kept["wall_s"], kept["cpu"], kept["resumed"])
    if state == "partial":
        print(f"  {name}: continuing from its last checkpoint in {run.root}", flush=True)

    def on_step(m: StepMetrics) -> None:
        print(f"  {name}: step {m.step}/{steps} in {m.times.total_s:.1f} s", flush=True)

    from services.orchestrator.pipeline import train  # Ray loads only when something is trained

    cpu_before, start = read_cpu(), time.perf_counter()
    train(settings, run, on_step, lambda _: None)
    wall = time.perf_counter() - start
    cpu = cpu_utilisation(cpu_before, read_cpu())
    resumed = state == "partial"
    times[name] = {"wall_s": wall, "cpu": cpu, "resumed": resumed}
    (root / TIMES_FILE).write_text(json.dumps(times, indent=1))
    return run_figures(run, name, wall, cpu, resumed)


def run_figures(run: RunDir, name: str, wall: float, cpu: float, resumed: bool = False) -> RunFigures:
    """A finished run's figures from its files; ``wall`` and ``cpu`` as measured around it."""
    settings = saved_settings(run.saved_config())
    steps = settings.optim.steps
    metrics = read_jsonl(run.path("metrics.jsonl"), StepMetrics)
    evals = read_jsonl(run.path("eval.jsonl"), EvalRecord)
    turn_stats = read_jsonl(run.path("turn_stats.jsonl"), TurnStatsRecord)
    envs = []
    for source in settings.task_sources():
        env = source.env
        last_eval = [e for e in evals if (e.env or env) == env and e.step == steps][-1]
        first = [e for e in evals if (e.env or env) == env and e.step == 0]
        parts = [next(s for s in m.sources if s.env == env) if m.sources is not None else m for m in metrics]
        probes = [p for p in parts if p.probe]
        mine = [r for r in turn_stats if (r.env or env) == env]
        turns = min(mine[0].h_roll, mine[-1].h_roll)
        envs.append(
            EnvFigures(
                env=env,
                episodes=sum(p.trajectories + p.failed_episodes for p in parts),
                success=last_eval.success_rate,
                eval_episodes=last_eval.episodes * last_eval.n,
                before=first[0].success_rate if first else None,
                h_hat=[p.h_hat for p in parts],
                h_bar=probes[-1].h_bar if probes else float("nan"),
                h_eff=probes[-1].h_eff if probes else None,
                kl_turns=turns,
                kl_first=mean_token_kl(mine[0].trajectories, turns),
                kl_last=mean_token_kl(mine[-1].trajectories, turns),
            )
        )
    return RunFigures(name, wall, metrics[-1].cumulative_s, cpu, envs, resumed)


def num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def won_of(rate: float, episodes: int) -> int:
    return round(rate * episodes)


def rate_text(rate: float | None, episodes: int) -> str:
    if rate is None:
        return "-"
    won = won_of(rate, episodes)
    low, high = wilson_interval(won, episodes)
    return f"{won}/{episodes} ({100 * low:.0f}-{100 * high:.0f}%)"


def above(after: EnvFigures, before: float | None) -> str:
    """Whether ``after``'s 95% interval lies above the starting student's ("-": no step-0 point)."""
    if before is None:
        return "-"
    low_after = wilson_interval(won_of(after.success, after.eval_episodes), after.eval_episodes)[0]
    high_before = wilson_interval(won_of(before, after.eval_episodes), after.eval_episodes)[1]
    return "yes" if low_after > high_before else "no"


def print_figures(multi: RunFigures, singles: list[RunFigures]) -> None:
    print(
        f"\n{'env':<10} {'episodes':>8} {'before':>16} {'multi after':>16} {'above':>5} "
        f"{'single after':>16} {'above':>5}"
    )
    for mine, single in zip(multi.envs, [s.envs[0] for s in singles], strict=True):
        assert mine.env == single.env and mine.episodes == single.episodes
        print(
            f"{mine.env:<10} {mine.episodes:>8} {rate_text(mine.before, mine.eval_episodes):>16} "
            f"{rate_text(mine.success, mine.eval_episodes):>16} {above(mine, mine.before):>5} "
            f"{rate_text(single.success, single.eval_episodes):>16} {above(single, mine.before):>5}"
        )
    print("\nreverse KL to the teacher per token, step 1 -> step N, over the turns both reached:")
    for mine, single in zip(multi.envs, [s.envs[0] for s in singles], strict=True):
        for label, e in (("multi", mine), ("single", single)):
            print(
                f"  {e.env:<10} {label:<7} {num(e.kl_first)} -> {num(e.kl_last)}   (first {e.kl_turns} turns)"
            )
    print("\nH_hat at every step (last probe's H_bar, H_eff):")
    for mine, single in zip(multi.envs, [s.envs[0] for s in singles], strict=True):
        for label, e in (("multi", mine), ("single", single)):
            print(
                f"  {e.env:<10} {label:<7} {' '.join(map(str, e.h_hat))}   (H_bar {e.h_bar:.1f}, H_eff {e.h_eff})"
            )
    print(f"\n{'run':<18} {'wall s':>8} {'sum of steps s':>15} {'CPU':>6}")
    for r in [multi, *singles]:
        mark = "  (resumed: the last sitting only)" if r.resumed else ""
        print(f"{r.name:<18} {r.wall_s:>8.0f} {r.steps_s:>15.0f} {100 * r.cpu:>5.0f}%{mark}")
    wall = sum(s.wall_s for s in singles)
    steps = sum(s.steps_s for s in singles)
    print(f"{'singles together':<18} {wall:>8.0f} {steps:>15.0f}")
    if any(r.resumed for r in [multi, *singles]):  # a wall time of one sitting is no run's wall time
        print(
            f"\nmulti / singles together: sum of steps {multi.steps_s / steps:.2f}x (wall: a run was resumed)"
        )
        return
    print(
        f"\nmulti / singles together: wall {multi.wall_s / wall:.2f}x, sum of steps {multi.steps_s / steps:.2f}x"
    )
    busy = multi.cpu * multi.wall_s  # the multi-environment run's busy CPU time, per core
    print(f"ceiling, the multi-environment run with the CPU always busy: {busy:.0f} s, {busy / wall:.2f}x")


def reprint(figures: Path, root: Path) -> None:
    """The figures of a finished bench again, from its --json file (the wall times and CPU) and its
    kept runs (everything else)."""
    runs = [
        run_figures(RunDir(root / r["name"]), r["name"], r["wall_s"], r["cpu"], r.get("resumed", False))
        for r in json.loads(figures.read_text())["runs"]
    ]
    print_figures(runs[0], runs[1:])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, default=Path("configs/multi_env.toml"))
    parser.add_argument("--steps", type=int, default=None, help="Steps of every run (default: the config's).")
    parser.add_argument("--keep", type=Path, default=None, help="Keep the runs under this new folder.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures to this file.")
    parser.add_argument(
        "--reprint",
        type=Path,
        default=None,
        help="Train nothing: print the figures again from a --json FILE and the runs kept under --keep.",
    )
    args = parser.parse_args()
    if args.reprint is not None:
        if args.keep is None:
            parser.error("--reprint needs --keep: the folder the runs were kept in")
        reprint(args.reprint, args.keep)
        return
    base: dict[str, Any] = {}
    if args.steps is not None:
        base = {"optim": {"steps": args.steps}, "eval": {"interval": args.steps}}
    multi_settings = load_settings(args.config, base)
    if not multi_settings.sources:
        parser.error(f"--config {args.config}: it has no [[sources]]; name a multi-environment config")
    steps = multi_settings.optim.steps
    if multi_settings.eval.interval <= 0 or steps % multi_settings.eval.interval:
        parser.error(
            f"--config {args.config}: [eval] interval must divide the steps, to evaluate after step {steps}"
        )
    with tempfile.TemporaryDirectory(prefix="turnopd-bench-multi-env-") as tmp:
        root = args.keep.resolve() if args.keep is not None else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        print(f"{args.config}: {steps} steps, batch {multi_settings.optim.batch}, runs under {root}")
        multi = run_once(args.config, "multi", base, root)
        singles = []
        for source in multi_settings.task_sources():
            overrides = merged(base, single_source_overrides(multi_settings, source.env))
            # the same student as the multi-environment run's step 0: not evaluated again
            overrides = merged(overrides, {"eval": {"at_start": False}})
            singles.append(run_once(args.config, f"single-{source.env}", overrides, root))
        print_figures(multi, singles)
        if args.json is not None:
            runs = [asdict(r) for r in [multi, *singles]]
            args.json.write_text(
                json.dumps({"config": str(args.config), "steps": steps, "runs": runs}, indent=1)
            )


if __name__ == "__main__":
    main()
