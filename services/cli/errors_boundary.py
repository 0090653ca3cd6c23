"""The CLI's error boundary: expected errors become one line on stderr and a non-zero exit."""

import sys

import typer

from services.errors import TurnOPDError

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def _usage_message(exc: typer.TyperException) -> tuple[str, int]:
    fmt = getattr(exc, "format_message", None)
    message = fmt() if callable(fmt) else str(exc)
    return " ".join(str(message).split()), int(getattr(exc, "exit_code", EXIT_BAD_INPUT))


def run_app(app: typer.Typer, argv: list[str] | None = None) -> int:
    """Run ``app`` on ``argv`` in standalone=False mode; return the process exit code."""
    try:
        result = app(args=argv, prog_name="turnopd", standalone_mode=False)
    except TurnOPDError as exc:
        print(f"error: {exc}", file=sys.stderr)
        for note in getattr(exc, "__notes__", []):  # what to do next, added on the way up
            print(f"hint: {note}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (typer.Abort, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.TyperException as exc:
        # Usage errors (unknown option, missing argument, bad type): click's message on one line.
        message, code = _usage_message(exc)
        print(f"error: {message} (see --help)", file=sys.stderr)
        return code
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return result if isinstance(result, int) else 0
