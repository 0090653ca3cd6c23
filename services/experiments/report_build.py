"""`turnopd report`: read run / comparison directories, write PNG figures, report.md and report.html.

Per run: turn-resolved KL with teacher entropy, the success/failure gap G_t by phase, per-turn loss
share, the depth controller. Across runs: the accuracy-vs-wall-time frontier, the main comparison
table (``summary.json`` of a comparison directory, else computed here with the same protocols) and
the loss-allocation table.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, get_args

from services.contracts.controller import StepDecision
from services.contracts.diagnosis import DiagnosisReport
from services.contracts.experiments import ComparisonSummary
from services.contracts.jsonl import read_jsonl
from services.contracts.method import Method
from services.contracts.records import TurnStatsRecord
from services.diagnostics.allocation import diagnose
from services.diagnostics.step_stats import step_stats
from services.errors import InputError
from services.experiments import figures
from services.experiments.compare_dir import load_run, read_summary, run_dirs_under, write_atomic
from services.experiments.protocols import RunLogs, summarise
from services.experiments.report_data import (
    accuracy_curve,
    controller_trace,
    entropy_grid,
    gap_by_phase,
    kl_grid,
    loss_share_grid,
    shown_turns,
)
from services.experiments.report_page import Block, Heading, Image, Paragraph, render_page
from services.experiments.tables import Table, allocation_table, comparison_table, task_type_table
from services.run_dir import DECISIONS_FILE, TURN_STATS_FILE, RunDir
from services.settings.tree import DiagnosticsSettings, TurnOPDSettings, saved_settings

REPORT_HTML = "report.html"
REPORT_MARKDOWN = "report.md"


@dataclass(frozen=True)
class ReportRun:
    """One run as the report shows it; a multi-environment run is one view per source (its
    evaluations, turn statistics, decisions and blend), ``whole`` its logs for the comparison."""

    label: str
    slug: str
    settings: TurnOPDSettings
    logs: RunLogs
    records: list[TurnStatsRecord]
    decisions: list[StepDecision]
    whole: RunLogs
    env: str | None = None


@dataclass(frozen=True)
class ReportOutput:
    html: Path
    markdown: Path
    figures: list[Path]
    notes: list[str]


def load_report_runs(paths: Sequence[Path]) -> list[ReportRun]:
    """Every run directory under ``paths`` (each a run or a comparison directory), each once."""
    seen: dict[Path, None] = {}
    for path in paths:
        for run in run_dirs_under(path):
            seen.setdefault(run.resolve(), None)
    runs, slugs = [], set()
    for path in seen:
        settings = saved_settings(RunDir(path).saved_config())
        logs = load_run(path)
        slug = f"{logs.method}_seed{logs.seed}"
        while slug in slugs:
            slug += "_"
        slugs.add(slug)
        whole = ReportRun(
            label=f"{logs.method} seed {logs.seed}",
            slug=slug,
            settings=settings,
            logs=logs,
            records=sorted(read_jsonl(path / TURN_STATS_FILE, TurnStatsRecord), key=lambda r: r.step),
            decisions=read_jsonl(path / DECISIONS_FILE, StepDecision),
            whole=logs,
        )
        runs += source_views(whole)
    return runs


def source_views(run: ReportRun) -> list[ReportRun]:
    """The run itself, or one view per task source of a multi-environment run."""
    if not run.settings.sources:
        return [run]
    return [
        replace(
            run,
            label=f"{run.label}, {source.env}",
            slug=f"{run.slug}_{source.env}",
            settings=run.settings.model_copy(update={"blend": source.blend}),
            logs=replace(run.logs, evals=[e for e in run.logs.evals if e.env == source.env]),
            records=[r for r in run.records if r.env == source.env],
            decisions=[d for d in run.decisions if d.env == source.env],
            env=source.env,
        )
        for source in run.settings.task_sources()
    ]


def comparison_summaries(
    paths: Sequence[Path], runs: Sequence[ReportRun]
) -> tuple[list[ComparisonSummary], str]:
    """The comparison directories' summary.json files, else one computed over all runs (or why not)."""
    found = [read_summary(p) for p in paths]
    if found and all(s is not None for s in found):
        return [s for s in found if s is not None], ""
    wholes = list({r.whole.run_dir: r.whole for r in runs}.values())
    steps = min(max(m.step for m in w.metrics) for w in wholes)
    order = {method: i for i, method in enumerate(get_args(Method))}  # the paper's table order
    logs = sorted(wholes, key=lambda g: (order.get(g.method, len(order)), g.seed))
    try:
        return [summarise(logs, steps)], f"Comparison computed by the report at K = {steps}."
    except InputError as exc:
        return [], f"No comparison table: {exc}"


def _diagnosis(run: ReportRun, thresholds: DiagnosticsSettings) -> DiagnosisReport:
    return diagnose(run.records, run.settings.blend, thresholds)


def run_figures(run: ReportRun, thresholds: DiagnosticsSettings, window: int, out: Path) -> list[Image]:
    """The four per-run figures, written to ``out`` and returned for the page."""
    stats = [step_stats(r, run.settings.blend.min_floor, run.settings.blend.min_frac) for r in run.records]
    shown = shown_turns(stats, thresholds)
    entropy = entropy_grid(run.records, shown.count)
    paths = [
        figures.kl_figure(
            kl_grid(stats, shown.count),
            entropy if entropy.has_values() else None,
            shown,
            window,
            run.label,
            out / f"{run.slug}_kl.png",
        ),
        figures.gap_figure(gap_by_phase(stats, shown.count), shown, run.label, out / f"{run.slug}_gap.png"),
        figures.loss_share_figure(
            loss_share_grid(stats, shown.count), shown, window, run.label, out / f"{run.slug}_loss_share.png"
        ),
        figures.controller_figure(
            controller_trace(run.decisions), run.label, out / f"{run.slug}_controller.png"
        ),
    ]
    captions = [
        "Teacher entropy and reverse KL per turn over training (lines smoothed, heatmap raw).",
        "Success/failure KL gap G_t by turn, mean per training phase (early 30% / mid 30% / late 40% of steps).",
        "Per-turn share of the loss mass under the step's actual (blended) weights.",
        "Depth controller: H_eff at probes, H_cov, EMA horizon H_bar, applied cap H_hat, turns collected.",
    ]
    return [Image(p.name, p.read_bytes(), c) for p, c in zip(paths, captions, strict=True)]


def build_report(
    paths: Sequence[Path], out: Path, window: int = 5, thresholds: Mapping[str, Any] | None = None
) -> ReportOutput:
    """Write every figure, ``report.md`` and ``report.html`` into ``out``."""
    if window < 1:
        raise InputError(f"--smooth must be >= 1, got {window}")
    runs = load_report_runs(paths)
    out.mkdir(parents=True, exist_ok=True)
    summaries, note = comparison_summaries(paths, runs)
    tables: list[Table] = []
    for summary in summaries:
        tables.append(comparison_table(summary))
        if any(m.per_env for m in summary.methods.values()):
            tables += [task_type_table(summary, p, "per_env") for p in ("least_time", "same_step")]
        if any(m.per_task_type for m in summary.methods.values()):
            tables += [task_type_table(summary, "least_time"), task_type_table(summary, "same_step")]
    per_run_thresholds = {
        r.slug: DiagnosticsSettings.model_validate(
            {**r.settings.diagnostics.model_dump(), **(thresholds or {})}
        )
        for r in runs
    }
    allocation = allocation_table([(r.label, _diagnosis(r, per_run_thresholds[r.slug])) for r in runs])
    cutoffs = [c for s in summaries for c in s.least_time_cutoff_s.values()]
    frontier = figures.frontier_figure(
        [
            accuracy_curve(
                r.logs.method if r.env is None else f"{r.logs.method} {r.env}", r.logs.seed, r.logs.evals
            )
            for r in runs
        ],
        cutoffs,
        out / "frontier.png",
    )
    blocks: list[Block] = [Heading("Comparison")]
    blocks += [Paragraph(note)] if note else []
    blocks += [
        *tables,
        Image(frontier.name, frontier.read_bytes(), "Validation Avg@n vs cumulative step wall time."),
    ]
    blocks += [Heading("Loss allocation"), allocation]
    images: dict[str, list[Image]] = {}
    for run in runs:
        images[run.slug] = run_figures(run, per_run_thresholds[run.slug], window, out)
        blocks += [Heading(f"Run: {run.label}"), Paragraph(f"{run.logs.run_dir}"), *images[run.slug]]
    markdown = out / REPORT_MARKDOWN
    parts = [
        f"# TurnOPD report\n\n{note}\n" if note else "# TurnOPD report\n",
        *(t.markdown() for t in tables),
    ]
    parts += [f"![Accuracy-time frontier]({frontier.name})\n", allocation.markdown()]
    for run in runs:
        links = "\n".join(f"![{i.caption}]({i.file_name})" for i in images[run.slug])
        parts.append(f"## Run: {run.label}\n\n{links}\n")
    write_atomic(markdown, "\n".join(parts))
    page = out / REPORT_HTML
    write_atomic(page, render_page("TurnOPD report", blocks))
    return ReportOutput(
        html=page,
        markdown=markdown,
        figures=[frontier, *(out / i.file_name for run_images in images.values() for i in run_images)],
        notes=[note] if note else [],
    )
