"""A resumable SFT run: model, optimizer and progress saved every ``[sft] checkpoint_every`` steps.

The state lives beside the checkpoint it will become (``<parent>/.<name>.resume/``): ``state.pt``
(weights, AdamW moments, losses so far) and ``run.json`` (the settings that fix the step plan and
the dataset). `turnopd teacher train` with the same settings continues from it; with different
ones it is an error naming the differing keys (``--fresh`` discards it), never a silent mix of two
runs. The step plan is a seeded function of those settings, so a resumed run trains on exactly the
batches the interrupted one had left. Both files are written to a temporary name and renamed in: a
crash while saving leaves the previous state.
"""

import json
import os
import shutil
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from services.errors import ConflictError, InputError
from services.settings.diff import settings_differences
from services.settings.sft import SFTSettings

RESUME_FORMAT = 1
STATE_FILE = "state.pt"
RUN_FILE = "run.json"
# [sft] keys that change neither the step plan nor the result of a step.
NEUTRAL_KEYS = frozenset({"threads", "checkpoint_every", "gateway_url", "collect_concurrency"})


@dataclass(frozen=True)
class TrainState:
    """Where an SFT run stood after ``next_step`` optimizer steps of ``total_steps``."""

    next_step: int
    total_steps: int
    losses: list[float]
    tokens_seen: int
    seconds: float
    model_state: dict[str, Any]
    optimizer_state: dict[str, Any]


def resume_dir(target: Path) -> Path:
    """Where the partial run of the checkpoint ``target`` is kept."""
    return target.parent / f".{target.name}.resume"


def run_key(settings: SFTSettings, dataset: str, task_reminder: bool = False) -> dict[str, Any]:
    """What a saved state must match to be resumed: the ``[sft]`` settings, the dataset's name and
    the observation format (``[rollout] task_reminder``, recorded only when on, so states saved
    before the key existed still resume)."""
    key: dict[str, Any] = settings.model_dump(mode="json", exclude=set(NEUTRAL_KEYS))
    if key.get("novel_token_weight") == 1.0:  # off: states saved before the key existed still resume
        del key["novel_token_weight"]
    if not key.get("mix"):  # one env: likewise
        key.pop("mix", None)
    key["dataset"] = dataset
    if task_reminder:
        key["task_reminder"] = True
    key["format"] = RESUME_FORMAT
    return key


class ResumeStore:
    """Save, load and clear the partial run of one checkpoint target."""

    def __init__(self, directory: Path, key: dict[str, Any]) -> None:
        self.directory = directory
        self.key = key

    def load(self) -> TrainState | None:
        """The saved state, or None when there is none; ConflictError when it was another run's."""
        import torch

        run_file, state_file = self.directory / RUN_FILE, self.directory / STATE_FILE
        if not (run_file.is_file() and state_file.is_file()):
            return None
        try:
            saved = json.loads(run_file.read_text())
        except json.JSONDecodeError as exc:
            raise InputError(f"{run_file} is not valid JSON ({exc}); remove it or pass --fresh") from exc
        differing = settings_differences(saved, self.key)
        if differing:
            raise ConflictError(
                f"{self.directory} holds a partial run with other settings ({', '.join(differing)} differ); "
                "run with the same settings to continue it, or pass --fresh to discard it"
            )
        saved_state = torch.load(state_file, map_location="cpu", weights_only=True)
        return TrainState(**saved_state)

    def save(self, state: TrainState) -> None:
        """Replace the saved state with ``state`` (atomically)."""
        import torch

        self.directory.mkdir(parents=True, exist_ok=True)
        tmp_state = self.directory / f".{STATE_FILE}.tmp"
        torch.save({f.name: getattr(state, f.name) for f in fields(state)}, tmp_state)
        tmp_run = self.directory / f".{RUN_FILE}.tmp"
        tmp_run.write_text(json.dumps(self.key, indent=2, sort_keys=True) + "\n")
        os.replace(tmp_state, self.directory / STATE_FILE)
        os.replace(tmp_run, self.directory / RUN_FILE)

    def clear(self) -> None:
        """Forget the partial run (after the finished checkpoint is saved, or on --fresh)."""
        shutil.rmtree(self.directory, ignore_errors=True)
