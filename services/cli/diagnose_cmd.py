"""`turnopd diagnose RUN_DIR`: the paper's loss-allocation table from a run's turn statistics."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from services.cli.options import settings_with
from services.contracts.diagnosis import DiagnosisReport
from services.contracts.jsonl import read_jsonl
from services.contracts.records import TurnStatsRecord
from services.diagnostics.allocation import diagnose as diagnose_records
from services.errors import InputError
from services.settings.tree import saved_settings

TURN_STATS_FILE = "turn_stats.jsonl"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None, fmt: str = ".4f") -> str:
    return "-" if value is None else format(value, fmt)


def render(report: DiagnosisReport, console: Console) -> None:
    """Print the allocation table, then the per-turn table."""
    console.print(
        f"steps {report.first_step}..{report.last_step} ({report.steps}); reliable prefix R = "
        f"{report.reliable_prefix} (>= {report.min_survivors} survivors, >= {_pct(report.min_survivor_frac)} of "
        f"turn 0, in >= {_pct(report.min_step_frac)} of steps); shallow third {report.shallow_turns}, "
        f"deep third {report.deep_turns}"
    )
    table = Table(
        title="Loss allocation (deep vs shallow third of the reliable prefix)",
        caption="Deep budget: deep third's share of trajectory-level loss mass; (w): under the actual blended weights.",
    )
    for col in (
        "Phase",
        "Steps",
        "alpha",
        "Deep/shallow KL",
        "Deep support",
        "Deep budget",
        "Deep budget (w)",
    ):
        table.add_column(col, justify="right")
    for phase in report.phases.values():
        span = f"{phase.first_step}-{phase.last_step}" if phase.n_steps else "-"
        table.add_row(
            phase.name,
            span,
            _num(phase.alpha_mean, ".2f"),
            _pct(phase.deep_shallow_kl_ratio),
            _pct(phase.deep_support),
            _pct(phase.deep_loss_budget),
            _pct(phase.deep_loss_budget_actual),
        )
    table.add_row(
        "overall",
        f"{report.first_step}-{report.last_step}",
        "",
        _pct(report.deep_shallow_kl_ratio),
        _pct(report.deep_support),
        _pct(report.deep_loss_budget),
        _pct(report.deep_loss_budget_actual),
    )
    console.print(table)
    turns = Table(
        title="Per turn (means over steps)",
        caption="n_t survivors, K_t raw KL, G_t = K_t^fail - K_t^succ, loss shares under actual (w) and trajectory-level weights.",
    )
    for col in (
        "Turn",
        "Reliable",
        "Support",
        "n_t",
        "K_t",
        "G_t",
        "Share (w)",
        "Share (traj)",
    ):
        turns.add_column(col, justify="right")
    for t in report.per_turn:
        turns.add_row(
            str(t.turn),
            "yes" if t.reliable else "",
            _pct(t.support_frac),
            f"{t.mean_survivors:.1f}",
            _num(t.mean_kl),
            _num(t.gap),
            _pct(t.loss_share),
            _pct(t.loss_share_traj),
        )
    console.print(turns)


def diagnose(
    run_dir: Annotated[Path, typer.Argument(help=f"Run directory holding {TURN_STATS_FILE}.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
    min_survivors: Annotated[int | None, typer.Option(help="Support: min survivors (default: 8).")] = None,
    min_survivor_frac: Annotated[
        float | None, typer.Option(help="Support: min share of turn 0 (default: 0.1).")
    ] = None,
    min_step_frac: Annotated[
        float | None, typer.Option(help="Reliable: min share of steps (default: 0.6).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="TOML config giving the blend and diagnostics sections.")
    ] = None,
    env: Annotated[
        str | None, typer.Option(help="A multi-environment run's source: diagnose its part of every step.")
    ] = None,
) -> None:
    """Per-turn KL, survivors, success/failure gap, loss share and deep-budget statistics of a run."""
    run_config = run_dir / "config.json"
    if config is None and run_config.is_file():
        # A `turnopd train` run: its own [blend] floor gives the actual weights' reliability rule.

        saved = saved_settings(run_config.read_text())
        blend = saved.blend if env is None or not saved.sources else saved.task_source(env).blend
        blend_from_run = {"blend": blend.model_dump()}
    else:
        blend_from_run = {}
    settings = settings_with(
        config,
        **blend_from_run,
        diagnostics={
            "min_survivors": min_survivors,
            "min_survivor_frac": min_survivor_frac,
            "min_step_frac": min_step_frac,
        },
    )
    if not run_dir.is_dir():
        raise InputError(f"run directory not found: {run_dir}")
    records = read_jsonl(run_dir / TURN_STATS_FILE, TurnStatsRecord)
    envs = sorted({r.env for r in records if r.env is not None})
    if envs and env is None:
        raise InputError(f"the run has several task sources ({', '.join(envs)}): name one with --env")
    if env is not None:
        records = [r for r in records if r.env == env]
        if not records:
            raise InputError(f"no turn statistics of env {env!r} in {run_dir / TURN_STATS_FILE}")
    report = diagnose_records(records, settings.blend, settings.diagnostics)
    if as_json:
        print(report.model_dump_json())
    else:
        render(report, Console())
