"""The report's PNG figures (matplotlib, Agg backend): a thin layer over ``report_data``'s series."""

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from services.experiments.frontier import Band
from services.experiments.report_data import (
    AccuracyCurve,
    ControllerTrace,
    ShownTurns,
    TurnGrid,
    smooth,
)
from services.orchestrator.run_result import Score

DPI = 110


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _integer_ticks(ax: Axes, x: bool, y: bool) -> None:
    if x:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if y:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _series(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _turn_lines(ax: Axes, grid: TurnGrid, shown: ShownTurns, window: int, ylabel: str, title: str) -> None:
    cmap = plt.get_cmap("viridis")
    n = min(shown.count, grid.turns)
    for t in range(n):
        ax.plot(
            grid.steps,
            _series(smooth(grid.column(t), window)),
            color=cmap(t / max(n - 1, 1)),
            label=f"turn {t}",
        )
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.ticklabel_format(axis="y", useOffset=False)
    _integer_ticks(ax, x=True, y=False)
    if n:
        ax.legend(fontsize="x-small", ncol=2 if n > 6 else 1)


def _heatmap(ax: Axes, fig: Figure, grid: TurnGrid, turns: int, label: str, title: str) -> None:
    data = np.ma.masked_invalid(np.array([_series(row[:turns]) for row in grid.values], dtype=float).T)
    image = ax.imshow(
        data,
        aspect="auto",
        origin="lower",
        interpolation="nearest",
        cmap="magma",
        extent=(grid.steps[0] - 0.5, grid.steps[-1] + 0.5, -0.5, turns - 0.5),
    )
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("turn (0-based)")
    ax.set_title(title)
    _integer_ticks(ax, x=True, y=True)
    fig.colorbar(image, ax=ax, label=label)


def _prefix_note(shown: ShownTurns) -> str:
    return (
        f"reliable prefix: turns 0-{shown.count - 1}"
        if shown.reliable
        else f"no reliable prefix at these thresholds: all {shown.count} turns"
    )


def kl_figure(
    kl: TurnGrid, entropy: TurnGrid | None, shown: ShownTurns, window: int, label: str, path: Path
) -> Path:
    """Teacher entropy (if recorded), smoothed per-turn reverse KL, and the raw step x turn KL heatmap."""
    panels = 3 if entropy is not None else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.0))
    i = 0
    if entropy is not None:
        _turn_lines(axes[0], entropy, shown, window, "teacher entropy (nats)", "Teacher entropy by turn")
        i = 1
    _turn_lines(
        axes[i], kl, shown, window, "reverse KL K_t", f"Per-turn reverse KL (smoothed, {window} steps)"
    )
    _heatmap(axes[i + 1], fig, kl, max(shown.count, 1), "reverse KL", "Reverse KL, raw (step x turn)")
    entropy_note = "" if entropy is not None else " - teacher entropy not recorded in this run"
    fig.suptitle(f"{label}: turn-resolved KL ({_prefix_note(shown)}){entropy_note}")
    return _save(fig, path)


def gap_figure(gaps: Mapping[str, Sequence[float | None]], shown: ShownTurns, label: str, path: Path) -> Path:
    """G_t = K_t^fail - K_t^succ by turn, one curve per training phase."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for phase, row in gaps.items():
        ax.plot(range(len(row)), _series(row), marker="o", label=phase)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xlim(-0.5, max(shown.count, 1) - 0.5)
    if all(v is None for row in gaps.values() for v in row):
        ax.text(
            0.5,
            0.62,
            "no turn was reached by both successful and failed trajectories",
            transform=ax.transAxes,
            ha="center",
            color="dimgrey",
        )
    ax.set_xlabel("turn (0-based)")
    ax.set_ylabel("G_t = K_t(fail) - K_t(succ)")
    _integer_ticks(ax, x=True, y=False)
    ax.set_title(f"{label}: success/failure KL gap by phase\n({_prefix_note(shown)})", fontsize="medium")
    ax.legend(title="phase")
    return _save(fig, path)


def loss_share_figure(share: TurnGrid, shown: ShownTurns, window: int, label: str, path: Path) -> Path:
    """Per-turn share of the loss mass: smoothed lines and the raw step x turn heatmap."""
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 4.0))
    _turn_lines(
        axes[0], share, shown, window, "share of loss mass", f"Loss share by turn (smoothed, {window} steps)"
    )
    _heatmap(axes[1], fig, share, max(shown.count, 1), "share of loss mass", "Loss share, raw (step x turn)")
    fig.suptitle(f"{label}: per-turn loss share under the step's weights ({_prefix_note(shown)})")
    return _save(fig, path)


def controller_figure(trace: ControllerTrace, label: str, path: Path) -> Path:
    """H_eff (probes), H_cov, the EMA horizon H_bar, the applied cap H_hat and the depth rolled out."""
    fig, ax = plt.subplots(figsize=(9.6, 4.2))
    ax.step(
        trace.steps,
        trace.h_roll,
        where="mid",
        color="lightgrey",
        label="H_roll (rollout cap; H_max on probes)",
    )
    ax.plot(trace.steps, trace.h_bar, color="tab:blue", linewidth=2, label="H_bar (EMA horizon)")
    ax.step(trace.steps, trace.h_cov, where="post", color="tab:green", label="H_cov (coverage bound)")
    ax.plot(trace.steps, trace.h_hat, color="tab:purple", linestyle="--", label="H_hat (applied cap)")
    eff = _series(trace.h_eff)
    ax.scatter(trace.steps, eff, color="tab:orange", zorder=3, label="H_eff (KL centroid, probes)")
    if trace.probe_steps:
        low = min(min(trace.h_cov), np.nanmin(eff) if np.isfinite(eff).any() else 0.0) - 0.5
        ax.plot(
            trace.probe_steps,
            [low] * len(trace.probe_steps),
            "|",
            color="black",
            markersize=10,
            label="probe step",
        )
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("horizon (0-based turn index)")
    _integer_ticks(ax, x=True, y=True)
    ax.set_title(f"{label}: depth controller")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def frontier_figure(curves: Sequence[AccuracyCurve], cutoffs_s: Sequence[float], path: Path) -> Path:
    """Validation Avg@n against cumulative step wall time, one colour per method, one line per seed."""
    fig, ax = plt.subplots(figsize=(9.6, 4.6))
    methods = list(dict.fromkeys(c.method for c in curves))
    colours = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
    styles = ["-", "--", ":", "-."]
    seeds = sorted({c.seed for c in curves})
    for c in curves:
        style = styles[seeds.index(c.seed) % len(styles)]
        label = c.method if len(seeds) == 1 else f"{c.method} seed {c.seed}"
        ax.plot(
            c.wall_s,
            [100 * a for a in c.accuracy],
            style,
            marker="o",
            markersize=3,
            color=colours[c.method],
            label=label,
        )
    accuracies = [100 * a for c in curves for a in c.accuracy]
    if accuracies:
        ax.set_ylim(max(0.0, min(accuracies) - 5.0) - 1.0, min(100.0, max(accuracies) + 5.0) + 1.0)
    for i, cutoff in enumerate(sorted(set(cutoffs_s))):
        ax.axvline(cutoff, color="grey", linestyle=":", label="Least-Time cutoff" if i == 0 else None)
    ax.set_xlabel("cumulative training wall time (s)")
    ax.set_ylabel("validation Avg@n (%)")
    ax.set_title("Accuracy-time frontier")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def frontier_band_figure(
    bands: Sequence[Band],
    curves: Sequence[AccuracyCurve],
    threshold: float | None,
    teacher: float | None,
    path: Path,
) -> Path:
    """Success against cumulative step wall time per method: the seed mean of the seeds' step
    functions, their min-max band, the evaluation points, the reach threshold and the teacher."""
    fig, ax = plt.subplots(figsize=(8.0, 4.6))
    colours = {b.method: plt.get_cmap("tab10")(i % 10) for i, b in enumerate(bands)}
    for b in bands:
        colour = colours[b.method]
        low, high = (100 * np.array(v) for v in (b.low, b.high))
        ax.fill_between(b.wall_s, low, high, step="post", color=colour, alpha=0.2, linewidth=0)
        ax.step(
            b.wall_s,
            [100 * v for v in b.mean],
            where="post",
            color=colour,
            label=f"{b.method} ({b.seeds} seeds)",
        )
    for c in curves:
        ax.plot(c.wall_s, [100 * a for a in c.accuracy], ".", color=colours.get(c.method, "grey"), alpha=0.5)
    if threshold is not None:
        ax.axhline(
            100 * threshold, color="grey", linestyle="--", linewidth=0.8, label="90% of vanilla's final"
        )
    if teacher is not None:
        ax.axhline(100 * teacher, color="black", linestyle=":", linewidth=0.8, label="teacher, same games")
    ax.set_xlabel("cumulative training wall time (s)")
    ax.set_ylabel("validation success (%)")
    ax.set_title("Accuracy-time frontier (mean over seeds, min-max band)")
    ax.legend(fontsize="small", loc="lower right")
    return _save(fig, path)


def success_figure(curve: Sequence[tuple[int, Score]], teacher: Score | None, path: Path) -> Path:
    """A run's success after each evaluation, with 95% Wilson intervals, and the teacher's level."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    steps = [step for step, _ in curve]
    rates = np.array([100 * s.rate for _, s in curve])
    low = np.array([100 * s.interval[0] for _, s in curve])
    high = np.array([100 * s.interval[1] for _, s in curve])
    ax.errorbar(steps, rates, yerr=[rates - low, high - rates], marker="o", capsize=4, label="student")
    if teacher is not None:
        ax.axhline(100 * teacher.rate, color="grey", linestyle="--", label="teacher, same games")
    ax.set_ylim(0, 100)
    ax.set_xlabel("optimizer step (0: before training)")
    ax.set_ylabel("success (%), 95% Wilson interval")
    # episodes = games x val_n: "games" would overcount them when val_n > 1
    episodes = sorted({s.episodes for _, s in curve})
    # two lines: one would be cut at the figure's width
    ax.set_title(
        f"Student success on the same validation games\n({'/'.join(map(str, episodes))} episodes per evaluation)",
        fontsize="medium",
    )
    _integer_ticks(ax, x=True, y=False)
    ax.legend(fontsize="small", loc="upper left")
    return _save(fig, path)
