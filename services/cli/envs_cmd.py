"""`turnopd envs ...`: the env gateway's game pools (generate them ahead of a run, check the expert)."""

import json
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar, get_args

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from services.cli.options import settings_with
from services.contracts.env_gateway import EnvName, Split
from services.errors import InputError
from services.settings.env_gateway import EnvGatewaySettings

if TYPE_CHECKING:
    # Imported where a command runs: the pool builder imports every env's backend (TextWorld among
    # them), half a second that every other `turnopd` command would pay at start.
    from services.env_gateway.pool_builder import ExpertRun, GameRef

app = typer.Typer(help="Game pools of the env gateway.", no_args_is_help=True)
R = TypeVar("R")

EnvOption = Annotated[
    list[str] | None, typer.Option("--env", help="alfworld, textworld, search, webshop (default: all).")
]
SplitOption = Annotated[
    list[str] | None, typer.Option("--split", help="train, valid_unseen (default: both).")
]
TaskOption = Annotated[list[str] | None, typer.Option("--task-type", help="Only these task types.")]
JobsOption = Annotated[int, typer.Option(min=1, help="Parallel generator processes.")]
ConfigOption = Annotated[
    Path | None, typer.Option(help="TOML config whose env_gateway section sizes the pools.")
]


def _choices(values: list[str] | None, allowed: tuple[str, ...], what: str) -> list[str]:
    chosen = values or list(allowed)
    unknown = sorted(set(chosen) - set(allowed))
    if unknown:
        raise InputError(f"unknown {what} {unknown}; choose from {list(allowed)}")
    return chosen


@dataclass(frozen=True)
class _Selection:
    """The pools' settings, the run's service token (sent to remote servers) and the games."""

    settings: EnvGatewaySettings
    token: str | None
    games: list["GameRef"]


def _select(
    env: list[str] | None, split: list[str] | None, task_type: list[str] | None, config: Path | None
) -> _Selection:
    from services.env_gateway.pool_builder import pool_games

    loaded = settings_with(config, ("env_gateway", "security"))
    settings, token = loaded.env_gateway, loaded.security.resolved_service_token()
    envs: list[EnvName] = _choices(env, get_args(EnvName), "env")  # type: ignore[assignment]
    splits: list[Split] = _choices(split, get_args(Split), "split")  # type: ignore[assignment]
    return _Selection(settings, token, pool_games(settings, envs, splits, task_type, token))


def _run_all(
    label: str, fn: Callable[[str, "GameRef", str | None], R], selection: _Selection, jobs: int
) -> Iterable[R]:
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    settings_json, games = selection.settings.model_dump_json(), selection.games
    with Progress(*columns) as progress, ProcessPoolExecutor(max_workers=jobs) as pool:
        task = progress.add_task(label, total=len(games))
        futures = [pool.submit(fn, settings_json, game, selection.token) for game in games]
        for future in as_completed(futures):
            yield future.result()
            progress.advance(task)


@app.command("build")
def build(
    env: EnvOption = None,
    split: SplitOption = None,
    task_type: TaskOption = None,
    jobs: JobsOption = 2,
    config: ConfigOption = None,
) -> None:
    """Generate every game of the selected pools into the cache; games already there are reused."""
    from services.env_gateway.pool_builder import build_game

    selection = _select(env, split, task_type, config)
    list(_run_all("generating games", build_game, selection, jobs))
    typer.echo(f"{len(selection.games)} games ready under {selection.settings.resolved_cache_dir()}")


@app.command("check-expert")
def check_expert(
    env: EnvOption = None,
    split: SplitOption = None,
    task_type: TaskOption = None,
    jobs: JobsOption = 2,
    config: ConfigOption = None,
) -> None:
    """Play every selected game with the expert; print a JSON summary per task type, fail on a loss."""
    from services.env_gateway.pool_builder import run_expert

    runs: list[ExpertRun] = list(
        _run_all("expert playing", run_expert, _select(env, split, task_type, config), jobs)
    )
    by_type: dict[str, list[ExpertRun]] = {}
    for run in runs:
        by_type.setdefault(f"{run.game.env}/{run.game.split}/{run.game.task_type}", []).append(run)
    for key, group in sorted(by_type.items()):
        turns = [r.turns for r in group]
        won = sum(r.won for r in group)
        summary = {"pool": key, "games": len(group), "won": won, "mean_turns": sum(turns) / len(turns)}
        typer.echo(json.dumps(summary | {"max_turns": max(turns)}))
    lost = [r.game.label() for r in runs if not r.won]
    if lost:
        raise InputError(f"the expert lost {len(lost)} games: {', '.join(lost[:10])}")
