"""The run directory of `turnopd train`: resolved config, per-step JSONL logs, checkpoints, Redis data.

Logs are appended one line per step and flushed at once. On ``--resume`` every log is cut back to
the steps the last checkpoint includes, so the resumed run writes each step exactly once.
"""

import json
from pathlib import Path

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


class RunDir:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, name: str) -> Path:
        return self.root / name

    @property
    def redis_dir(self) -> Path:
        return self.root / "redis"

    def create(self, config_json: str) -> None:
        """A fresh run: the directory must not hold another run's logs."""
        if any(self.path(name).exists() for name in LOGS):
            raise InputError(
                f"{self.root} already holds a run; use --resume {self.root} or another --run-dir"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        self.path(CONFIG_FILE).write_text(config_json)

    def saved_config(self) -> str:
        try:
            return self.path(CONFIG_FILE).read_text()
        except FileNotFoundError:
            raise InputError(f"{self.root} is not a run directory (no {CONFIG_FILE})") from None

    def append(self, name: str, line: str) -> None:
        with self.path(name).open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()

    def truncate_after(self, step: int) -> None:
        """Drop every log line whose ``step`` is beyond ``step`` (resume from a checkpoint)."""
        for name in LOGS:
            path = self.path(name)
            if not path.exists():
                continue
            kept = [
                line
                for line in path.read_text().splitlines()
                if line.strip() and json.loads(line)["step"] <= step
            ]
            path.write_text("".join(line + "\n" for line in kept))

    def steps_logged(self, name: str = METRICS_FILE) -> list[int]:
        path = self.path(name)
        if not path.exists():
            return []
        return [json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip()]
