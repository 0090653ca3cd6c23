"""`turnopd teacher train`: supervised training of a model on expert episodes from the env gateway."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from services.cli.options import recipe_with
from services.teacher_training.pipeline import CollectProgress
from services.teacher_training.trainer import StepReport

app = typer.Typer(help="Train the teacher by imitation of the env gateway's expert.", no_args_is_help=True)


def _plain_line_due(done: int, total: int, lines: int) -> bool:
    """True at every ``1/lines`` of ``total``: where a non-terminal stream (a log file, CI), which
    shows no live bar, gets a plain progress line instead."""
    return done % max(1, total // lines) == 0


class _CollectBar(CollectProgress):
    """The collection's stages and one step per expert episode."""

    def __init__(self, progress: Progress, console: Console) -> None:
        self._progress = progress
        self._console = console
        self._task = progress.add_task("expert data", total=None, info="")
        self._dropped = 0
        self._done = 0
        self._total = 0
        self._env = ""

    def stage(self, description: str) -> None:
        self._progress.update(self._task, description=description)

    def start(self, total_episodes: int, env: str = "") -> None:
        """Counts start again for each env of a joint recipe."""
        self._total, self._done, self._dropped, self._env = total_episodes, 0, 0, env
        label = f"collecting expert episodes ({env})" if env else "collecting expert episodes"
        self._progress.reset(self._task, description=label, total=total_episodes, info="")

    def episode(self, won: bool) -> None:
        self._dropped += 0 if won else 1
        self._done += 1
        self._progress.update(self._task, advance=1, info=f"{self._dropped} dropped" if self._dropped else "")
        if not self._console.is_terminal and _plain_line_due(self._done, self._total, 10):
            env = f" {self._env}" if self._env else ""
            self._console.print(f"expert episodes{env} {self._done}/{self._total} ({self._dropped} dropped)")


@app.command("train")
def train(
    episodes: Annotated[
        int | None, typer.Option(min=1, help="Expert episodes to train on (config: sft.episodes).")
    ] = None,
    epochs: Annotated[
        float | None, typer.Option(min=0.0, help="Passes over the episodes (config: sft.epochs).")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(min=0, help="Seed of games, data order and run (config: sft.seed).")
    ] = None,
    out: Annotated[
        str | None, typer.Option(help="Zoo name or path to save the model as (config: sft.out).")
    ] = None,
    base: Annotated[str | None, typer.Option(help="Model to start from (config: sft.base).")] = None,
    lr: Annotated[float | None, typer.Option(min=0.0, help="Peak learning rate (config: sft.lr).")] = None,
    env_url: Annotated[
        str | None, typer.Option(help="A running env gateway (default: start one for the collection).")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="Teacher recipe (configs/teachers/*.toml); flags given here override it."),
    ] = None,
    fresh: Annotated[
        bool, typer.Option(help="Discard a saved partial run of this output instead of continuing it.")
    ] = False,
) -> None:
    """Collect (or reuse) expert episodes, fine-tune the base model on them, save the checkpoint.

    Interrupted training continues where its last saved state left it (config: sft.checkpoint_every).
    """
    from transformers.utils import logging as hf_logging

    from services.teacher_training.pipeline import check_request, expert_datasets, train_teacher

    hf_logging.disable_progress_bar()
    overrides = {"episodes": episodes, "epochs": epochs, "seed": seed, "out": out, "base": base, "lr": lr}
    settings = recipe_with(config, sft={**overrides, "gateway_url": env_url})
    check_request(settings)
    console = Console(stderr=True)
    columns = (
        TextColumn("{task.description:<30}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
    )
    with Progress(*columns, console=console) as progress:
        datasets = expert_datasets(settings, config, _CollectBar(progress, console))
        task = progress.add_task("training", total=None, info="")

        def on_stage(description: str) -> None:
            progress.update(task, description=description)

        def on_step(report: StepReport) -> None:
            info = f"loss {report.loss:.4f}  acc {report.token_accuracy:.3f}  lr {report.lr:.1e}"
            progress.update(task, total=report.total_steps, completed=report.step + 1, info=info)
            if not console.is_terminal and _plain_line_due(report.step + 1, report.total_steps, 20):
                console.print(f"training step {report.step + 1}/{report.total_steps}  {info}")

        trained = train_teacher(settings, datasets, on_step=on_step, on_stage=on_stage, fresh=fresh)
        progress.update(task, description="done")
    summary = trained.summary
    for dataset in datasets:
        info, state = dataset.info, "cached" if dataset.cached else "collected"
        console.print(
            f"expert data  {info.env} {state}: {info.episodes} episodes ({info.dropped} dropped) in {dataset.path}"
        )
    resumed = "" if trained.resumed_at_step is None else f" (resumed at step {trained.resumed_at_step})"
    console.print(
        f"training     {summary.steps} steps{resumed}, {summary.tokens_seen:,} tokens in {summary.seconds:.0f}s; "
        f"final loss {summary.losses[-1]:.4f}"
    )
    console.print(f"checkpoint   {trained.path}")
    typer.echo(str(trained.path))
