"""Entry point of the `turnopd` command: assembles the command groups and translates errors once."""

import sys

import typer

from services.cli.errors_boundary import run_app

app = typer.Typer(
    name="turnopd",
    help="TurnOPD: turn-aware on-policy distillation for long-horizon LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _register() -> None:
    # Command groups live in their own modules (`services/cli/*_cmd.py`); each exposes a typer app.
    from services.cli import controller_cmd, diagnose_cmd, models_cmd

    app.add_typer(controller_cmd.app, name="controller")
    app.add_typer(models_cmd.app, name="models")
    app.command("diagnose")(diagnose_cmd.diagnose)


def run() -> None:
    """Console-script entry: run the app, turning TurnOPD errors into one line on stderr."""
    _register()
    sys.exit(run_app(app))
