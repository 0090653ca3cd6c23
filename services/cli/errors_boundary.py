"""The CLI's error boundary: expected errors become one line on stderr and a non-zero exit."""

import sys

import click
import typer

from services.errors import TurnOPDError

EXIT_BAD_INPUT = 2


def run_app(app: typer.Typer) -> int:
    """Run ``app`` in standalone=False mode; return the process exit code."""
    try:
        result = app(standalone_mode=False)
    except TurnOPDError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except click.exceptions.Abort:
        print("aborted", file=sys.stderr)
        return 130
    except click.ClickException as exc:
        # Usage errors (unknown option, bad type): click's message, one line, its own exit code.
        print(f"error: {exc.format_message()}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_BAD_INPUT
    return result if isinstance(result, int) else 0
