"""The observation format a checkpoint was trained in, read from its manifest.

A model plays best in the format it learned: a teacher trained with the task restated in every
observation (``[rollout] task_reminder``) loses the goal without it, and one trained without it
reads an unfamiliar line. `turnopd teacher train` records the setting in the checkpoint's manifest
(``turnopd_build.json``); commands that play or distil a model compare it with their own settings
before anything starts. Zoo builds, real checkpoints and SFT models from before the key record
nothing and are never refused.
"""

from pathlib import Path

from services.errors import ConflictError
from services.models.build import read_manifest
from services.models.registry import resolve_model_dir

TASK_REMINDER_ENV = "TURNOPD_ROLLOUT__TASK_REMINDER"


def trained_task_reminder(directory: Path) -> bool | None:
    """The ``task_reminder`` a checkpoint's manifest records; None when it records none."""
    manifest = read_manifest(directory) or {}
    value = manifest.get("task_reminder")
    return value if isinstance(value, bool) else None


def check_task_reminder(reference: str, cache_dir: Path | None, wanted: bool) -> Path:
    """The checkpoint directory of ``reference``; refused if it was trained in another format."""
    directory = resolve_model_dir(reference, cache_dir)
    trained = trained_task_reminder(directory)
    if trained is None or trained == wanted:
        return directory
    flag = str(trained).lower()
    raise ConflictError(
        f"model {reference!r} was trained with rollout.task_reminder = {flag}, but these settings have "
        f"{str(wanted).lower()}; set task_reminder = {flag} in the config's [rollout] section "
        f"(or {TASK_REMINDER_ENV}={flag})"
    )
