"""`turnopd controller ...`: the depth controller's diagnostic replay."""

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from services.cli.options import settings_with
from services.contracts.controller import ProbeStats
from services.contracts.jsonl import read_jsonl
from services.contracts.records import TurnStatsRecord
from services.controller.replay import replay, unused_snapshot_steps
from services.errors import InputError
from services.orchestrator.probe_stats import probe_stats
from services.run_dir import SECRET_FIELDS, TURN_STATS_FILE, RunDir
from services.settings import load_settings
from services.settings.tree import saved_settings

app = typer.Typer(help="The adaptive rollout-depth controller.", no_args_is_help=True)


def run_probes(turn_stats: Path, env: str | None, multi: bool) -> list[ProbeStats]:
    """The probe statistics of a run's probe steps (of source ``env``, required in a multi-environment run)."""
    if multi and env is None:
        raise InputError("the run has several task sources: name one with --env")
    records = read_jsonl(turn_stats, TurnStatsRecord)
    return [probe_stats(r) for r in records if r.probe and (not multi or r.env == env)]


def _index_by_step(snapshots: list[ProbeStats], path: Path) -> dict[int, ProbeStats]:
    by_step: dict[int, ProbeStats] = {}
    for snap in snapshots:
        if snap.step in by_step:
            raise InputError(f"{path}: step {snap.step} appears more than once")
        by_step[snap.step] = snap
    return by_step


@app.command("replay")
def replay_cmd(
    snapshots_file: Annotated[
        Path,
        typer.Argument(
            help="Probe snapshots, JSONL: step, kl_per_turn, survivors, success_turns; or a run directory, "
            "whose probe steps' turn statistics give them (and whose config the defaults)."
        ),
    ],
    steps: Annotated[int | None, typer.Option("--steps", help="K: steps to replay (default: 100).")] = None,
    ema_alpha: Annotated[float | None, typer.Option(help="EMA weight on H_ctrl (default: 0.3).")] = None,
    coverage_quantile: Annotated[float | None, typer.Option(help="p of H_cov (default: 0.8).")] = None,
    min_cov_traj: Annotated[
        int | None, typer.Option(help="Min successes to refresh H_cov (default: 8).")
    ] = None,
    h_min: Annotated[int | None, typer.Option("--h-min", help="H_min clamp (default: 2).")] = None,
    h_max: Annotated[
        int | None, typer.Option("--h-max", help="H_max clamp, probe depth, H_bar_0 (default: 50).")
    ] = None,
    probe_interval: Annotated[int | None, typer.Option(help="Steps between probes (default: 8).")] = None,
    warmup_steps: Annotated[int | None, typer.Option(help="Probe-only warm-up steps (default: 3).")] = None,
    use_success: Annotated[
        bool | None,
        typer.Option("--use-success/--all-trajectories", help="H_cov from successes (the default) or all."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="TOML config whose depth and optim sections give the defaults.")
    ] = None,
    lag: Annotated[
        int,
        typer.Option(
            "--lag", min=0, help="Staleness s: plan step k from the state after step k-1-s (default 0: k-1)."
        ),
    ] = 0,
    env: Annotated[
        str | None,
        typer.Option(
            help="A multi-environment run's source: replay its controller, from its own probes and depth."
        ),
    ] = None,
) -> None:
    """Replay the controller over logged probes; print one JSON line per step 1..K."""
    flags: dict[str, dict[str, Any]] = dict(
        optim={"steps": steps},
        depth={
            "ema_alpha": ema_alpha,
            "coverage_quantile": coverage_quantile,
            "min_cov_traj": min_cov_traj,
            "min": h_min,
            "max": h_max,
            "probe_interval": probe_interval,
            "warmup_steps": warmup_steps,
            "use_success": use_success,
        },
    )
    run = RunDir(snapshots_file) if snapshots_file.is_dir() else None
    if run is not None and config is None:  # the run's own settings, the flags given on top
        saved = saved_settings(run.saved_config()).model_dump(exclude=SECRET_FIELDS)
        for section, values in flags.items():
            saved[section].update({key: value for key, value in values.items() if value is not None})
        settings = load_settings(None, saved)
    else:
        settings = settings_with(config, **flags)
    depth = settings.depth if env is None else settings.for_controller(env).depth
    if run is not None:
        snapshots = run_probes(run.path(TURN_STATS_FILE), env, multi=bool(settings.sources))
    else:
        snapshots = read_jsonl(snapshots_file, ProbeStats)
    by_step = _index_by_step(snapshots, snapshots_file)
    total = settings.optim.steps
    # Decide everything before printing, so a bad snapshot never leaves a half-written output.
    lines = [json.dumps(d.model_dump()) for d in replay(by_step, total, depth, lag)]
    sys.stdout.write("\n".join(lines) + "\n")
    unused = unused_snapshot_steps(by_step, total, depth)
    if unused:
        shown = ", ".join(map(str, unused[:10])) + (" ..." if len(unused) > 10 else "")
        print(
            f"note: {len(unused)} snapshot(s) not on probe steps 1..{total} were ignored: {shown}",
            file=sys.stderr,
        )
