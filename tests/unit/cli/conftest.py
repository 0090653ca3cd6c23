import json
from pathlib import Path

import pytest

from services.cli.main import main

REPO = Path(__file__).resolve().parents[3]


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def json_lines(self) -> list[dict]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


@pytest.fixture
def cli(capsys):
    """Run `turnopd ARGS...` in-process; return exit code and captured output."""

    def run(*args: str) -> CliResult:
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def examples() -> Path:
    return REPO / "examples"
