"""Entry point of the `turnopd` command: assembles the command groups and translates errors once."""

import sys

import typer

from services.cli.errors_boundary import run_app


def build_app() -> typer.Typer:
    """The `turnopd` app with every command group registered (each lives in its own *_cmd module)."""
    from services.cli import (
        compare_cmd,
        controller_cmd,
        diagnose_cmd,
        envs_cmd,
        eval_cmd,
        models_cmd,
        report_cmd,
        restart_cmd,
        scale_cmd,
        serve_cmd,
        status_cmd,
        summary_cmd,
        teacher_cmd,
        train_cmd,
    )

    app = typer.Typer(
        name="turnopd",
        help="TurnOPD: turn-aware on-policy distillation for long-horizon LLM agents.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    app.add_typer(controller_cmd.app, name="controller")
    app.add_typer(models_cmd.app, name="models")
    app.command("diagnose")(diagnose_cmd.diagnose)
    app.command("summary")(summary_cmd.summary)
    app.command("train")(train_cmd.train)
    app.command("status")(status_cmd.status)
    app.command("restart")(restart_cmd.restart)
    app.command("scale")(scale_cmd.scale)
    app.command("compare")(compare_cmd.compare)
    app.command("report")(report_cmd.report)
    app.add_typer(serve_cmd.app, name="serve")
    app.add_typer(envs_cmd.app, name="envs")
    app.command("eval")(eval_cmd.eval_)
    app.add_typer(teacher_cmd.app, name="teacher")
    return app


def main(argv: list[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default: sys.argv[1:]) and return the exit code."""
    return run_app(build_app(), argv)


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
