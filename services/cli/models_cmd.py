"""`turnopd models ...`: build the tiny model zoo, resolve model names to checkpoint directories."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from services.models.build import build_zoo
from services.models.registry import resolve_model_dir
from services.settings import load_settings
from services.settings.models import ModelsSettings

app = typer.Typer(help="Tiny Qwen3-architecture model zoo: build and locate it.", no_args_is_help=True)

ConfigOption = Annotated[Path | None, typer.Option("--config", help="TOML settings file.")]
CacheOption = Annotated[
    Path | None, typer.Option("--cache-dir", help="Cache root (overrides models.cache_dir).")
]

# Steps reported by build_zoo: corpus, tokenizer, then one per model.
_BUILD_STEPS = 4


def _models_settings(config: Path | None, cache_dir: Path | None) -> ModelsSettings:
    settings = load_settings(config).models
    if cache_dir is not None:
        settings.cache_dir = cache_dir
    return settings


@app.command("build")
def build(
    seed: Annotated[int | None, typer.Option(help="Zoo seed (overrides models.seed).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if cached.")] = False,
    cache_dir: CacheOption = None,
    config: ConfigOption = None,
) -> None:
    """Build the tokenizer and the teacher/student checkpoints into the cache (reused when up to date)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own bar reports the steps
    settings = _models_settings(config, cache_dir)
    zoo_seed = settings.seed if seed is None else seed
    console = Console()
    with Progress(
        TextColumn("{task.description:<40}"), BarColumn(), TimeElapsedColumn(), console=console
    ) as progress:
        task = progress.add_task("starting", total=_BUILD_STEPS)
        started = False

        def on_step(description: str) -> None:
            nonlocal started
            if started:
                progress.advance(task)
            started = True
            progress.update(task, description=description)

        artifacts = build_zoo(
            cache_dir=settings.cache_dir,
            seed=zoo_seed,
            vocab_size=settings.vocab_size,
            force=force,
            entity_max_number=settings.entity_max_number,
            entity_embeddings=settings.entity_embeddings,
            on_step=on_step,
        )
        progress.update(task, completed=_BUILD_STEPS, description="done")
    for artifact in artifacts:
        state = "built" if artifact.built else "cached"
        params = f"  {artifact.num_parameters:,} parameters" if artifact.num_parameters else ""
        console.print(f"{artifact.name:<10} {state:<7} {artifact.path}{params}")


@app.command("path")
def path(
    name: Annotated[str, typer.Argument(help="'teacher', 'student', another zoo name, or a path.")],
    cache_dir: CacheOption = None,
    config: ConfigOption = None,
) -> None:
    """Print the checkpoint directory a model name resolves to (it must exist)."""
    settings = _models_settings(config, cache_dir)
    typer.echo(str(resolve_model_dir(name, settings.cache_dir)))
