"""`turnopd train`: on-policy distillation with the TurnOPD controllers (or a baseline method)."""

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from services.cli.options import settings_with
from services.cli.result_view import load_result, render_result, write_success_figure
from services.contracts.method import Method
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.errors import InputError, TurnOPDError
from services.models.tokenizer_match import check_same_tokenizer
from services.models.trained_format import check_task_reminder, learned_per_env
from services.orchestrator.resume_checks import check_stop_after
from services.run_dir import CONFIG_FILE, METRICS_FILE, SECRET_FIELDS, RunDir
from services.settings import TurnOPDSettings, load_settings
from services.settings.tree import saved_settings


def _resolved(
    config: Path | None, method: Method | None, steps: int | None, run_dir: Path | None
) -> TurnOPDSettings:
    return settings_with(config, run={"method": method, "run_dir": run_dir}, optim={"steps": steps})


def resumed_settings(run: RunDir) -> TurnOPDSettings:
    """The settings a resumed run runs with, every service's included: those its config.json saved;
    the secrets it leaves out come from the environment again."""
    saved = saved_settings(run.saved_config())
    return load_settings(None, saved.model_dump(exclude=SECRET_FIELDS))


def depth_text(m: StepMetrics) -> str:
    """A step's depth and blend for the progress line: the run's controller, or each source's."""
    if not m.sources:
        kind = "probe" if m.probe else "     "
        return f"{kind} H_roll={m.h_roll:<3} H_hat={m.h_hat:<3} alpha={m.alpha:.2f}"
    return " ".join(
        f"{s.env}{'(probe)' if s.probe else ''}: H_roll={s.h_roll} H_hat={s.h_hat} alpha={s.alpha:.2f}"
        for s in m.sources
    )


def _check_formats(settings: TurnOPDSettings) -> None:
    """Student and teachers must have been trained in the observation format they play (or not
    say): the student in the run's (a joint student, in each source's), each teacher in its
    source's; in a multi-environment run every
    teacher must share the student's vocabulary. A source scoring on a server has no checkpoint
    here to read: its tokenizer is probed when the run starts."""
    cache = settings.models.cache_dir
    sources = settings.task_sources()
    student, rollout = settings.models.student, settings.rollout
    if settings.sources and learned_per_env(student, cache):  # a joint student: each env's format
        for source in sources:
            check_task_reminder(student, cache, source.task_reminder, source.env)
    else:
        check_task_reminder(student, cache, rollout.task_reminder, rollout.env)
    if not settings.sources:
        check_task_reminder(settings.models.teacher, cache, rollout.task_reminder, rollout.env)
        return
    teachers = {}
    for i, source in enumerate(sources):
        if source.endpoint_url:
            continue  # not a checkpoint here: its server's tokens are probed over HTTP as it starts
        check_task_reminder(source.teacher, cache, source.task_reminder, source.env)
        teachers[f"sources[{i}].teacher"] = source.teacher
    check_same_tokenizer(settings.models.student, teachers, cache)


def train(
    config: Annotated[Path | None, typer.Option(help="Run config (TOML), e.g. configs/demo.toml.")] = None,
    method: Annotated[
        Method | None, typer.Option(help="turnopd, vanilla, adaptive-depth, blend, turn-norm, tcod.")
    ] = None,
    steps: Annotated[int | None, typer.Option(help="Optimizer steps K (config: optim.steps).")] = None,
    run_dir: Annotated[Path | None, typer.Option(help="Run directory (config: run.run_dir).")] = None,
    resume: Annotated[
        Path | None, typer.Option(help="Continue the run in this directory from its last checkpoint.")
    ] = None,
    stop_after: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="End this sitting after step N, a checkpoint step (the run stays K steps: "
            "--resume goes on from N).",
        ),
    ] = None,
) -> None:
    """Distil the student on its own trajectories: plan, roll out, score, update, ingest."""
    if resume is not None:
        if any(v is not None for v in (config, method, steps, run_dir)):
            raise InputError(
                "--resume takes the run's saved config; do not combine it with other options "
                "(but --stop-after)"
            )
        run = RunDir(resume)
        settings = resumed_settings(run)
    else:
        settings = _resolved(config, method, steps, run_dir)
        _check_formats(settings)
        run = RunDir(settings.run.run_dir)
    if stop_after is not None:  # before anything is written or started
        last_logged = max(run.steps_logged(METRICS_FILE), default=0) if resume is not None else 0
        check_stop_after(stop_after, last_logged, settings.learner.checkpoint_every, settings.optim.steps)
    if resume is None:
        run.create(settings)
    started = time.perf_counter()
    console = Console(stderr=True)
    from services.orchestrator.pipeline import train as run_training  # Ray loads only for this command

    with Progress(
        TextColumn("[bold]train[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
    ) as progress:
        bar = progress.add_task("steps", total=settings.optim.steps, status="starting services")

        def on_step(m: StepMetrics) -> None:
            status = f"{depth_text(m)} KL={m.mean_kl:.3f} succ={m.success_rate:.2f} {m.times.total_s:.1f}s"
            progress.update(bar, completed=m.step, status=status)
            if not console.is_terminal:  # a log file gets a line per step instead of a live bar
                console.print(f"step {m.step}/{settings.optim.steps} {status}")

        def on_phase(text: str) -> None:
            progress.update(bar, status=text)
            if not console.is_terminal and text != "training":
                console.print(text)

        def on_eval(r: EvalRecord) -> None:
            progress.console.print(
                f"eval after step {r.step}: success {r.success_rate:.3f}, Avg@{r.n} {r.avg_at_n:.3f} on {r.split}"
            )

        try:
            last = run_training(settings, run, on_step, on_eval, on_phase, stop_after)
        except TurnOPDError as exc:
            exc.add_note(resume_hint(run.root))
            raise
    if last < settings.optim.steps:
        console.print(
            f"stopped after step {last} of {settings.optim.steps}, as asked (--stop-after); "
            f"go on with: turnopd train --resume {run.root}"
        )
        return
    result = load_result(run.root, settings)
    render_result(result, Console(), wall_s=time.perf_counter() - started)
    figure = write_success_figure(result, run.root)
    shown = f", {figure.name}" if figure else ""
    console.print(
        f"run directory: {run.root} ({CONFIG_FILE}, metrics.jsonl, turn_stats.jsonl, eval.jsonl{shown})"
    )


def resume_hint(run_dir: Path) -> str:
    """How a run that stopped on an error goes on (a lost learner node, say): from the checkpoint a
    resume takes, the newest intact one of a step the logs hold."""
    from services.learner.checkpoint import checkpoint_step, complete_checkpoints, latest_checkpoint

    checkpoint = latest_checkpoint(run_dir, at_most=max(RunDir(run_dir).steps_logged(), default=0))
    if checkpoint is None and complete_checkpoints(run_dir):
        return (
            f"no checkpoint of a logged step in {run_dir / 'checkpoints'} is intact; `turnopd train "
            f"--resume {run_dir}` starts over only where no logged step was checkpointed"
        )
    if checkpoint is None:
        return f"the run has no checkpoint yet; start it again (its directory: {run_dir})"
    step = checkpoint_step(checkpoint)
    return f"the run goes on from its checkpoint of step {step} with: turnopd train --resume {run_dir}"
