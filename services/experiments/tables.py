"""The report's tables as plain rows, rendered to Markdown or HTML (pure).

Accuracies are shown in percent with the paper's ``mean ± std`` (std over the window's evaluation
points); wall time in the largest unit that keeps it readable.
"""

import html
from collections.abc import Sequence
from dataclasses import dataclass

from services.contracts.diagnosis import DiagnosisReport
from services.contracts.experiments import ComparisonSummary


@dataclass(frozen=True)
class Table:
    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.header) + " |"]
        lines.append("|" + "|".join("---" for _ in self.header) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.note:
            lines += ["", self.note]
        return "\n".join(lines) + "\n"

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.header)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in self.rows
        )
        note = f"<p class='note'>{html.escape(self.note)}</p>" if self.note else ""
        return (
            f"<h3>{html.escape(self.title)}</h3><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>{note}"
        )


def pct(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}"


def pct_pm(mean: float | None, std: float | None) -> str:
    """``73.52 ± 1.84`` (percent), ``-`` without a mean."""
    if mean is None:
        return "-"
    return pct(mean) if std is None else f"{pct(mean)} ± {pct(std)}"


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def comparison_table(summary: ComparisonSummary) -> Table:
    """The paper's main table: Least-Time and Same-Step Avg@n, wall time for K steps, speedup."""
    rows = []
    for m in summary.methods.values():
        speedup = "-" if m.speedup_vs_vanilla is None else f"{m.speedup_vs_vanilla:.2f}x"
        h_roll = sum(r.mean_h_roll for r in m.runs) / len(m.runs)
        rows.append(
            [
                m.method,
                pct_pm(m.least_time_acc, m.least_time_std),
                pct_pm(m.same_step_acc, m.same_step_std),
                duration(m.wall_time_s),
                speedup,
                f"{h_roll:.2f}",
                ", ".join(str(s) for s in m.seeds),
            ]
        )
    cutoffs = ", ".join(f"seed {s}: {duration(c)}" for s, c in summary.least_time_cutoff_s.items())
    return Table(
        title=f"Main comparison ({summary.steps} steps)",
        header=[
            "Method",
            "Avg@n Least-Time",
            "Avg@n Same-Step",
            f"Wall ({summary.steps} steps)",
            f"Speedup vs {summary.baseline}",
            "Mean H_roll",
            "Seeds",
        ],
        rows=rows,
        note=(
            f"Accuracy in %: mean ± std over the last {summary.window} evaluation points before the "
            f"cutoff, averaged over seeds. Least-Time cutoffs (min wall time for {summary.steps} steps): "
            f"{cutoffs}."
        ),
    )


def task_type_table(summary: ComparisonSummary, protocol: str, by: str = "per_task_type") -> Table:
    """Per-task-type (``by``: or per-environment) Avg@n under ``protocol`` ('least_time' or
    'same_step'), one row per method."""
    types = sorted({t for m in summary.methods.values() for t in getattr(m, by)})
    rows = []
    for m in summary.methods.values():
        cells = []
        for t in types:
            s = getattr(m, by).get(t)
            cells.append(
                "-" if s is None else pct_pm(getattr(s, f"{protocol}_acc"), getattr(s, f"{protocol}_std"))
            )
        overall = pct_pm(getattr(m, f"{protocol}_acc"), getattr(m, f"{protocol}_std"))
        rows.append([m.method, *cells, overall])
    name = "Least-Time" if protocol == "least_time" else "Same-Step"
    if by == "per_env":
        return Table(
            title=f"Per environment, {name}",
            header=["Method", *types, f"Mean {name}"],
            rows=rows,
            note="Each environment is scored on its own evaluation points; the mean weighs them equally.",
        )
    return Table(
        title=f"Per task type, {name}",
        header=["Method", *types, f"Overall {name}"],
        rows=rows,
        note="Task-type scores use the same evaluation points as their environment's score.",
    )


def allocation_table(reports: Sequence[tuple[str, DiagnosisReport]]) -> Table:
    """The paper's loss-allocation table, one row per (run, phase)."""
    rows = []
    for label, report in reports:
        for phase in report.phases.values():
            span = f"{phase.first_step}-{phase.last_step}" if phase.n_steps else "-"
            alpha = "-" if phase.alpha_mean is None else f"{phase.alpha_mean:.2f}"
            rows.append(
                [
                    label,
                    phase.name,
                    span,
                    str(report.reliable_prefix),
                    alpha,
                    pct(phase.deep_shallow_kl_ratio, 1),
                    pct(phase.deep_support, 1),
                    pct(phase.deep_loss_budget, 1),
                    pct(phase.deep_loss_budget_actual, 1),
                ]
            )
    return Table(
        title="Loss allocation (deepest vs shallowest third of the reliable prefix)",
        header=[
            "Run",
            "Phase",
            "Steps",
            "R",
            "alpha",
            "Deep/shallow raw KL %",
            "Deep support %",
            "Deep loss budget %",
            "Deep budget (actual w) %",
        ],
        rows=rows,
        note=(
            "R: reliable prefix length. Deep loss budget: the deep third's share of the raw-KL loss mass "
            "under trajectory-level weights; (actual w): under the step's blended weights."
            + (
                " R = 0: no turn met the support thresholds (see --min-survivors, --min-survivor-frac, "
                "--min-step-frac)."
                if any(report.reliable_prefix == 0 for _, report in reports)
                else ""
            )
        ),
    )


def comparison_markdown(summary: ComparisonSummary) -> str:
    """``summary.md``: the main table and the per-task-type tables."""
    parts = [comparison_table(summary)]
    if any(m.per_env for m in summary.methods.values()):
        parts += [
            task_type_table(summary, "least_time", "per_env"),
            task_type_table(summary, "same_step", "per_env"),
        ]
    if any(m.per_task_type for m in summary.methods.values()):
        parts += [task_type_table(summary, "least_time"), task_type_table(summary, "same_step")]
    return "\n".join(t.markdown() for t in parts)
