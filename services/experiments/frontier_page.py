"""The frontier benchmark's tables, notes and JSON (pure): ``OUT/frontier.md`` and ``OUT/frontier.json``.

The Least-Time / Same-Step table is `turnopd compare`'s own (``tables.comparison_table``); this page
adds the seed spread, the time to 90% of vanilla's final accuracy, the best student against the
teacher, each single success rate with its 95% Wilson interval and the games it was measured on.
"""

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from services.contracts.experiments import ComparisonSummary
from services.errors import InputError
from services.experiments.frontier import REACH_SHARE, MethodFrontier, reach_ratio
from services.experiments.frontier_runs import LearnerPace, runs_json, runs_table
from services.experiments.protocols import TURNOPD
from services.experiments.step_cost import OneSpeed, one_speed_json, one_speed_table, steps_ratio_table
from services.experiments.step_kinds import RunStepKinds, step_kinds_json, step_kinds_table
from services.experiments.system_arms import SYSTEM_LABELS
from services.experiments.tables import Table, comparison_table, duration, pct, pct_pm
from services.orchestrator.run_result import Score

MIN_SEEDS = 3
# vanilla's time to 90% of its final over each arm's: the targets (the paper's method alone;
# the whole system, issue 63 item 3)
REACH_TARGETS = {TURNOPD: 1.5, SYSTEM_LABELS[TURNOPD]: 2.3}
MIN_GAMES = 60


@dataclass(frozen=True)
class Teacher:
    """The teacher's success on the runs' evaluation games (None: not comparable) and where it comes from."""

    score: Score | None
    note: str


@dataclass(frozen=True)
class FrontierReport:
    summary: ComparisonSummary
    methods: Mapping[str, MethodFrontier]
    teacher: Teacher
    games: int  # validation games per evaluation point
    n: int  # samples per game (Avg@n)
    # each run's learner ms per trained token (frontier_runs); empty: the per-run table is left out
    learner_ms_per_token: LearnerPace = field(default_factory=dict)
    # each run's full-depth and truncated steps (step_kinds); empty: that table is left out
    step_kinds: RunStepKinds = field(default_factory=dict)
    # the times to the threshold at one machine speed (step_cost); None: that table is left out
    one_speed: OneSpeed | None = None

    @property
    def threshold(self) -> float | None:
        """90% of vanilla's final accuracy; None: vanilla's final is 0 or missing."""
        return next((f.reach.threshold for f in self.methods.values() if f.reach is not None), None)

    @property
    def time_ratio(self) -> float | None:
        """Vanilla's mean time to the threshold over TurnOPD's."""
        return self.arm_ratio(TURNOPD)

    def arm_ratio(self, arm: str) -> float | None:
        """Vanilla's mean time to the threshold over ``arm``'s (None: an arm absent or a seed short)."""
        base, ours = self.methods.get(self.summary.baseline), self.methods.get(arm)
        if base is None or ours is None or base.reach is None or ours.reach is None:
            return None
        return reach_ratio(base.reach, ours.reach)

    def over_teacher(self, method: str) -> float | None:
        """The method's best (seed mean) over the teacher's success."""
        score = self.teacher.score
        if score is None or score.rate == 0.0:
            return None
        return self.methods[method].best_mean / score.rate


def interval_cell(rate: float, episodes: int) -> str:
    low, high = Score("", rate, episodes).interval
    return f"{pct(rate, 1)} [{pct(low, 0)}, {pct(high, 0)}]"


def spread_table(report: FrontierReport) -> Table:
    rows = []
    for m in report.summary.methods.values():
        rows.append(
            [
                m.method,
                pct_pm(m.least_time_acc, m.least_time_seed_std),
                pct_pm(m.same_step_acc, m.same_step_seed_std),
                f"{duration(m.wall_time_s)}"
                + ("" if m.wall_time_seed_std is None else f" ± {duration(m.wall_time_seed_std)}"),
            ]
        )
    return Table(
        title="Over seeds",
        header=["Method", "Least-Time", "Same-Step", f"Wall ({report.summary.steps} steps)"],
        rows=rows,
        note="Accuracy in %: the seed mean ± the sample std over seeds (the table above: ± over the window's points).",
    )


def _reach_cell(wall_s: float | None, step: int | None) -> str:
    return "not reached" if wall_s is None else f"{duration(wall_s)} (step {step})"


def reach_table(report: FrontierReport) -> Table:
    title = f"Time to {pct(REACH_SHARE, 0)}% of vanilla's final accuracy"
    if report.threshold is None:
        return Table(
            title=title,
            header=["Method", "Mean"],
            rows=[[m, "-"] for m in report.methods],
            note="No threshold: vanilla's final accuracy (its Same-Step accuracy) is 0 or missing, and "
            "every run reaches 90% of 0 at its first evaluation.",
        )
    seeds = report.summary.seeds
    base = report.methods.get(report.summary.baseline)
    rows = []
    for f in report.methods.values():
        if f.reach is None:
            continue
        by_seed = {s.seed: s for s in f.reach.seeds}
        mean = f.reach.mean_s
        ratio = None if base is None or base.reach is None else reach_ratio(base.reach, f.reach)
        rows.append(
            [
                f.method,
                *(_reach_cell(by_seed[s].wall_s, by_seed[s].step) for s in seeds),
                "-" if mean is None else duration(mean),
                f"{f.reach.reached}/{len(f.reach.seeds)}",
                "-" if ratio is None else f"{ratio:.2f}x",
            ]
        )
    ratio = report.time_ratio
    ratio_text = (
        f"vanilla / TurnOPD: {ratio:.2f}x (target >= {REACH_TARGETS[TURNOPD]}x)."
        if ratio is not None
        else "vanilla / TurnOPD: none (a method has a seed that never reached the threshold, or "
        "TurnOPD reached it at the start)."
    )
    for arm, target in REACH_TARGETS.items():
        arm_ratio = report.arm_ratio(arm)
        if arm != TURNOPD and arm_ratio is not None:
            ratio_text += f" vanilla / {arm}: {arm_ratio:.2f}x (target >= {target}x)."
    return Table(
        title=f"{title} ({pct(report.threshold, 1)}%)",
        header=["Method", *(f"seed {s}" for s in seeds), "Mean", "Reached", "vanilla / it"],
        rows=rows,
        note="Cumulative step wall time of the first evaluation point at or above the threshold "
        f"(vanilla's final: its Same-Step accuracy, seed mean). The mean needs every seed. {ratio_text}",
    )


def best_table(report: FrontierReport) -> Table:
    teacher = report.teacher.score
    rows = []
    for f in report.methods.values():
        ratio = report.over_teacher(f.method)
        rows.append(
            [
                f.method,
                "; ".join(
                    f"seed {b.seed}: {interval_cell(b.success_rate, b.episodes)} (step {b.step})"
                    for b in f.best
                ),
                pct(f.best_mean, 1),
                "-" if teacher is None else interval_cell(teacher.rate, teacher.episodes),
                "-" if ratio is None else f"{100 * ratio:.0f}%",
            ]
        )
    return Table(
        title="Best student against the teacher, same games",
        header=[
            "Method",
            "Best evaluation point per seed [95% Wilson]",
            "Mean best",
            "Teacher",
            "Student / teacher",
        ],
        rows=rows,
        note=f"Teacher: {report.teacher.note}. Target: student / teacher >= 90%. The best of many noisy "
        "points overstates a run; the intervals show by how much it can.",
    )


def notes(report: FrontierReport) -> list[str]:
    """The games behind each number, and where the runs fall short of the issue's protocol."""
    out = [
        f"Each evaluation point: {report.games} games x {report.n} sample{'s' if report.n > 1 else ''} = {report.games * report.n} "
        "episodes; one game moves a rate by "
        f"{pct(1 / report.games, 1)} points."
    ]
    seeds = len(report.summary.seeds)
    if seeds < MIN_SEEDS:
        out.append(
            f"{seeds} seed{'s' if seeds > 1 else ''}: fewer than the {MIN_SEEDS} the protocol asks; read the spread as noise."
        )
    if report.games < MIN_GAMES:
        out.append(f"{report.games} games per evaluation: fewer than the protocol's {MIN_GAMES}.")
    for method, f in report.methods.items():
        for x in f.lost:
            out.append(
                f"{method} seed {x.seed}, step {x.step}: {x.failed} of {x.episodes} episodes could not be "
                "played and count as failures; that point understates the model."
            )
    base = report.methods.get(report.summary.baseline)
    if base is not None:
        gain = base.late_gain
        out.append(
            "vanilla's flattening: too few evaluation points to tell (needs 8 per seed)."
            if gain is None
            else f"vanilla's flattening: its last 4 evaluation points average {pct(gain, 1)} points "
            "above the 4 before them (seed mean; near 0: flat)."
        )
        climb = base.whole_climb
        if base.late_slope is not None and climb is not None:
            out.append(
                f"vanilla's climb at the end: over its last 4 evaluation points it gains {pct(base.late_slope, 2)} "
                f"points a step (least squares, seed mean), against {pct(climb, 2)} a step over the whole run."
            )
    return out


def frontier_markdown(report: FrontierReport, figure: str | None) -> str:
    parts = [comparison_table(report.summary), spread_table(report), reach_table(report)]
    if report.one_speed is not None:
        parts.append(one_speed_table(report.summary, report.one_speed))
        eval_steps = sorted({s for f in report.methods.values() for c in f.curves for s in c.steps})
        parts.append(steps_ratio_table(report.one_speed, eval_steps))
    parts.append(best_table(report))
    if report.learner_ms_per_token:
        parts.append(runs_table(report.summary, report.methods, report.learner_ms_per_token))
    if report.step_kinds:
        parts.append(step_kinds_table(report.summary, report.step_kinds))
    seeds = len(report.summary.seeds)
    head = [
        f"# Accuracy-time frontier ({', '.join(report.methods)}; {seeds} seed{'s' if seeds > 1 else ''})",
        "",
    ]
    if figure is not None:
        head += [
            f"![Success against cumulative step wall time]({figure})",
            "",
            "Lines: the seed mean of each seed's step function (its last evaluation at or before the "
            "time); band: the seeds' min to max; dots: the evaluation points.",
            "",
        ]
    tail = ["### Notes", "", *(f"- {n}" for n in notes(report))]
    return "\n".join(head) + "\n" + "\n".join(t.markdown() for t in parts) + "\n" + "\n".join(tail) + "\n"


def _score_json(score: Score | None) -> dict[str, Any] | None:
    if score is None:
        return None
    low, high = score.interval
    return {"rate": score.rate, "episodes": score.episodes, "interval95": [low, high]}


def frontier_json(report: FrontierReport) -> dict[str, Any]:
    """Everything the page shows, as plain JSON (the comparison summary in ``summary.json`` beside it)."""
    methods = {}
    for name, f in report.methods.items():
        m = report.summary.methods[name]
        methods[name] = {
            "least_time_acc": m.least_time_acc,
            "least_time_seed_std": m.least_time_seed_std,
            "same_step_acc": m.same_step_acc,
            "same_step_seed_std": m.same_step_seed_std,
            "wall_time_s": m.wall_time_s,
            "speedup_vs_vanilla": m.speedup_vs_vanilla,
            "reach": None
            if f.reach is None
            else {
                "per_seed": [asdict(s) for s in f.reach.seeds],
                "mean_s": f.reach.mean_s,
                "reached": f.reach.reached,
                "vanilla_over_it": report.arm_ratio(name),
            },
            "best": [
                {**asdict(b), "interval95": list(Score("", b.success_rate, b.episodes).interval)}
                for b in f.best
            ],
            "best_mean": f.best_mean,
            "best_over_teacher": report.over_teacher(name),
            "late_gain": f.late_gain,
            "late_slope_per_step": f.late_slope,
            "whole_run_climb_per_step": f.whole_climb,
            "band": asdict(f.band),
        }
    return {
        "config": report.summary.config,
        "steps": report.summary.steps,
        "seeds": report.summary.seeds,
        "games": report.games,
        "n": report.n,
        "reach_share": REACH_SHARE,
        "threshold": report.threshold,
        "time_ratio_vanilla_over_turnopd": report.time_ratio,
        "teacher": {"score": _score_json(report.teacher.score), "note": report.teacher.note},
        "methods": methods,
        "runs": runs_json(report.summary, report.methods, report.learner_ms_per_token)
        if report.learner_ms_per_token
        else [],
        "step_kinds": step_kinds_json(report.step_kinds),
        "one_speed": None if report.one_speed is None else one_speed_json(report.one_speed),
        "notes": notes(report),
    }


def games_of(runs_episodes: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """(games, n) of the runs' evaluation points, given each point's (episodes, n); one value expected."""
    shapes = {(episodes // n, n) for episodes, n in runs_episodes}
    if len(shapes) != 1:
        raise InputError(f"the runs' evaluation points differ in games or samples: {sorted(shapes)}")
    return next(iter(shapes))
