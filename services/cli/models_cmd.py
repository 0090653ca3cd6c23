"""`turnopd models ...`: build the tiny model zoo, resolve names, list, verify and ship artifacts."""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from services.contracts.rollout import EvalReport
from services.models.build import build_zoo
from services.models.registry import resolve_model_dir
from services.models.ship import record_measurement, ship_model
from services.models.shipped import require_shipped, shipped_names
from services.settings import load_settings
from services.settings.models import ModelsSettings

app = typer.Typer(
    help="Tiny Qwen3-architecture model zoo and the shipped models: build, locate, verify, ship.",
    no_args_is_help=True,
)

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
    name: Annotated[
        str, typer.Argument(help="'teacher', 'student', a shipped or trained model's name, or a path.")
    ],
    cache_dir: CacheOption = None,
    config: ConfigOption = None,
) -> None:
    """Print the checkpoint directory a model name resolves to: the cache, else a shipped model (verified)."""
    settings = _models_settings(config, cache_dir)
    typer.echo(str(resolve_model_dir(name, settings.cache_dir)))


@app.command("list")
def list_() -> None:
    """The models shipped with the repository: what each is, its measured success, its recipe."""
    console = Console()
    for name in shipped_names():
        shipped = require_shipped(name)
        measured = shipped.measured
        score = (
            f"{100 * measured['success_rate']:.1f}% on {measured['games']} {measured['env']}/{measured['split']} "
            f"games (T={measured['temperature']:g})"
            if measured
            else "not measured"
        )
        console.print(f"[bold]{name}[/bold]  {shipped.manifest['description']}")
        console.print(f"  {score}; {shipped.path}")
        for command in shipped.manifest["recipe"]:
            console.print(f"  recipe: {command}", soft_wrap=True)


@app.command("verify")
def verify(
    names: Annotated[list[str] | None, typer.Argument(help="Shipped models (default: all).")] = None,
) -> None:
    """Check every shipped file against its manifest's sha256 (a mismatch names the file)."""
    for name in names or shipped_names():
        shipped = require_shipped(name)
        typer.echo(f"{name}: {len(shipped.manifest['files'])} files verified")


@app.command("perturb")
def perturb(
    base: Annotated[str, typer.Argument(help="The model to perturb: a name or checkpoint path.")],
    out: Annotated[str, typer.Option(help="Name (or path) the perturbed model is saved as.")],
    scale: Annotated[float, typer.Option(help="Noise per matrix, in units of that matrix's std.")] = 0.25,
    seed: Annotated[int, typer.Option(help="Seed of the noise.")] = 0,
    replace: Annotated[bool, typer.Option("--replace", help="Overwrite a model saved as OUT.")] = False,
    only: Annotated[
        str | None,
        typer.Option(
            help="Perturb only the matrices whose parameter name contains this (self_attn: the attention "
            "projections); unset: every matrix."
        ),
    ] = None,
    cache_dir: CacheOption = None,
) -> None:
    """Build a starting student from BASE with every weight matrix perturbed by seeded Gaussian noise
    (the demo's student: `turnopd models perturb teacher-novel --out student-novel-noisy`)."""
    from transformers.utils import logging as hf_logging

    from services.models.perturb import perturb_model

    hf_logging.disable_progress_bar()
    target = perturb_model(base, out, scale, seed, cache_dir=cache_dir, replace=replace, only=only)
    which = "" if only is None else f", only {only}"
    typer.echo(f"{out}: {base} perturbed (scale {scale:g}, seed {seed}{which}) saved at {target}")


@app.command("ship")
def ship(
    source: Annotated[str, typer.Argument(help="A trained model's name or checkpoint path.")],
    name: Annotated[str, typer.Option(help="Name of the shipped artifact (artifacts/models/NAME).")],
    recipe: Annotated[list[str], typer.Option(help="A command of the recipe that reproduces it (repeat).")],
    description: Annotated[str, typer.Option(help="One line: what the model is.")],
    dtype: Annotated[str, typer.Option(help="Stored weight dtype: bfloat16 or float32.")] = "bfloat16",
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite a shipped model of that name.")
    ] = False,
    cache_dir: CacheOption = None,
) -> None:
    """Maintainers: package a trained checkpoint as a shipped artifact (then measure it: record-eval)."""
    source_dir = resolve_model_dir(source, cache_dir)
    target = ship_model(
        source_dir, name, recipe=recipe, description=description, dtype=dtype, replace=replace
    )
    typer.echo(f"shipped {source_dir} as {target}")


@app.command("record-eval")
def record_eval(
    name: Annotated[str, typer.Argument(help="A shipped model.")],
    report: Annotated[Path, typer.Argument(help="`turnopd eval --json` output of the shipped weights.")],
    command: Annotated[str, typer.Option(help="The eval command that produced the report.")],
) -> None:
    """Maintainers: record a measured success in a shipped model's manifest."""
    shipped = require_shipped(name)
    evaluated = EvalReport.model_validate_json(report.read_text())
    manifest = record_measurement(shipped.path, evaluated, command)
    typer.echo(f"{name}: {100 * manifest['measured']['success_rate']:.1f}% recorded")
