"""The run directory of `turnopd train`: resolved config, per-step JSONL logs, checkpoints, Redis data.

Logs are appended one line per step and synced at once. On ``--resume`` every log is cut back to
the steps the last checkpoint includes (rewritten by a temp file and a rename, so a crash leaves the
old log or the new one), and the resumed run writes each step exactly once.

Every reader of the logs goes through ``RunDir.log_lines``: a last line cut off mid-write (no
newline, not valid JSON: a crash or power loss while appending) is left out with a warning, and
the resume's cut rewrites the file without it; a bad line anywhere else is damage, an InputError
naming file:line.
"""

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from services.durable_files import append_line, replace_text
from services.errors import InputError

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
TURN_STATS_FILE = "turn_stats.jsonl"
EVAL_FILE = "eval.jsonl"
DECISIONS_FILE = "controller.jsonl"
LOGS = (METRICS_FILE, TURN_STATS_FILE, EVAL_FILE, DECISIONS_FILE)
RESTARTS_FILE = "restarts.jsonl"  # `turnopd restart` outcomes; history, never cut back on resume
# Settings never written to config.json (model_dump ``exclude`` shape).
SECRET_FIELDS = {"controller": {"redis_password"}, "security": {"service_token"}}

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LogLine:
    """One complete line of a run's log: its text (without the newline) and its record."""

    text: str
    record: dict[str, Any]

    @property
    def step(self) -> int:
        step: int = self.record["step"]
        return step


@dataclass(frozen=True)
class ParsedLog:
    """A log's complete lines; ``torn``: its last line was cut off mid-write and is left out."""

    lines: list[LogLine]
    torn: bool


def parse_log(path: Path, data: bytes) -> ParsedLog:
    """The lines of a run's log (``data``, read from ``path``); InputError naming file:line for a bad
    line that is not a torn last one."""
    raw = data.split(b"\n")
    lines: list[LogLine] = []
    for lineno, chunk in enumerate(raw, start=1):
        if not chunk.strip():
            continue
        try:
            text = chunk.decode("utf-8")
            record = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            if lineno == len(raw):  # no newline after it: the append that wrote it never finished
                return ParsedLog(lines, torn=True)
            raise InputError(
                f"{path}:{lineno}: not a valid log line ({exc}); the run's log is damaged"
            ) from None
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise InputError(f"{path}:{lineno}: a log line needs a JSON object with an integer step")
        lines.append(LogLine(text, record))
    return ParsedLog(lines, torn=False)


class RunDir:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._torn_noticed: set[str] = set()  # logs whose torn last line was already reported

    def path(self, name: str) -> Path:
        return self.root / name

    @property
    def redis_dir(self) -> Path:
        return self.root / "redis"

    def create(self, settings: BaseModel) -> None:
        """A fresh run: the directory must not hold another run's logs. ``settings`` are written to
        config.json without ``SECRET_FIELDS`` (a resume reads those from the environment again)."""
        if any(self.path(name).exists() for name in LOGS):
            raise InputError(
                f"{self.root} already holds a run; use --resume {self.root} or another --run-dir"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        replace_text(self.path(CONFIG_FILE), settings.model_dump_json(exclude=SECRET_FIELDS, indent=2))

    def saved_config(self) -> str:
        try:
            return self.path(CONFIG_FILE).read_text()
        except FileNotFoundError:
            raise InputError(f"{self.root} is not a run directory (no {CONFIG_FILE})") from None

    def append(self, name: str, line: str) -> None:
        append_line(self.path(name), line)

    def log_lines(self, name: str) -> list[LogLine]:
        """The complete lines of log ``name`` (none if it does not exist); a torn last line is
        left out, and said once."""
        path = self.path(name)
        return self._parsed(name, path.read_bytes()) if path.exists() else []

    def _parsed(self, name: str, data: bytes) -> list[LogLine]:
        parsed = parse_log(self.path(name), data)
        if parsed.torn and name not in self._torn_noticed:
            self._torn_noticed.add(name)
            log.warning(
                "%s: dropped its torn last line (cut off mid-write, no newline, not valid JSON); "
                "a resume rewrites the file without it",
                self.path(name),
            )
        return parsed.lines

    def records(self, name: str) -> list[dict[str, Any]]:
        """The records of log ``name``, in order (see ``log_lines``)."""
        return [line.record for line in self.log_lines(name)]

    def truncate_after(self, step: int) -> None:
        """Drop every log line whose ``step`` is beyond ``step`` (resume from a checkpoint), and a torn
        last line; each log that changes is replaced atomically."""
        for name in LOGS:
            path = self.path(name)
            if not path.exists():
                continue
            data = path.read_bytes()
            text = "".join(line.text + "\n" for line in self._parsed(name, data) if line.step <= step)
            if text.encode("utf-8") != data:
                replace_text(path, text)

    def steps_logged(self, name: str = METRICS_FILE) -> list[int]:
        return [line.step for line in self.log_lines(name)]
