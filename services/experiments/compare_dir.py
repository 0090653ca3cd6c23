"""The layout of a comparison directory and reading its runs back (no Ray).

``DIR/<method>/seed<s>/`` is one `turnopd train` run directory (config.json, metrics.jsonl,
eval.jsonl, ...); ``DIR/summary.json`` (+ ``summary.md``) is written by `turnopd compare`.
"""

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from services.contracts.experiments import ComparisonSummary
from services.contracts.jsonl import read_jsonl
from services.contracts.orchestrator import EvalRecord, StepMetrics
from services.errors import InputError
from services.experiments.protocols import RunLogs
from services.run_dir import CONFIG_FILE, EVAL_FILE, METRICS_FILE, RunDir
from services.settings.diff import settings_differences
from services.settings.tree import TurnOPDSettings, saved_settings

SUMMARY_FILE = "summary.json"
SUMMARY_MARKDOWN = "summary.md"
RunState = Literal["new", "partial", "complete"]
# Keys that may differ between the saved config of a run and the one compare would start it with.
IGNORED_KEYS = frozenset({"run.run_dir"})


def run_path(out: Path, method: str, seed: int) -> Path:
    return out / method / f"seed{seed}"


def run_state(path: Path, steps: int) -> RunState:
    """new (no config.json), complete (steps 1..K logged and evaluated after K), else partial."""
    if not (path / CONFIG_FILE).is_file():
        return "new"
    run = RunDir(path)
    done = run.steps_logged(METRICS_FILE) == list(range(1, steps + 1))
    return "complete" if done and steps in run.steps_logged(EVAL_FILE) else "partial"


def config_differences(saved: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """Dotted keys whose values differ between a run's saved config and the wanted one (``IGNORED_KEYS`` left out)."""
    return settings_differences(saved, wanted, IGNORED_KEYS)


def load_run(path: Path) -> RunLogs:
    """A run directory's method, seed, metrics and evaluations."""
    if not path.is_dir():
        raise InputError(f"run directory not found: {path}")
    settings = saved_settings(RunDir(path).saved_config())
    return RunLogs(
        method=settings.run.method,
        seed=settings.run.seed,
        run_dir=str(path),
        metrics=read_jsonl(path / METRICS_FILE, StepMetrics),
        evals=read_jsonl(path / EVAL_FILE, EvalRecord),
    )


def run_dirs_under(root: Path) -> list[Path]:
    """``root`` itself if it is a run directory, else the run directories one or two levels below it."""
    if (root / CONFIG_FILE).is_file():
        return [root]
    if not root.is_dir():
        raise InputError(f"not a directory: {root}")
    found = sorted(p.parent for p in [*root.glob(f"*/{CONFIG_FILE}"), *root.glob(f"*/*/{CONFIG_FILE}")])
    if not found:
        raise InputError(f"{root} holds no run directory (no {CONFIG_FILE} at most two levels down)")
    return found


def read_summary(root: Path) -> ComparisonSummary | None:
    """``root/summary.json`` if there is one."""
    path = root / SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        return ComparisonSummary.model_validate_json(path.read_text())
    except ValueError as exc:
        raise InputError(f"{path}: not a comparison summary ({exc})") from None


def write_atomic(path: Path, text: str) -> None:
    """Write through a temporary file and rename, so readers never see half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def settings_json(settings: TurnOPDSettings, exclude: Mapping[str, Any]) -> dict[str, Any]:
    """Settings as the plain JSON dict config.json holds."""
    data: dict[str, Any] = json.loads(settings.model_dump_json(exclude=exclude))
    return data
