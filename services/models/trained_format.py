"""The observation format a checkpoint was trained in, read from its manifest.

A model plays best in the format it learned: a teacher trained with the task restated in every
observation (``[rollout] task_reminder``) loses the goal without it, and one trained without it
reads an unfamiliar line. `turnopd teacher train` records the setting in the checkpoint's manifest
(``turnopd_build.json``); commands that play or distil a model compare it with their own settings
before anything starts. A model trained on several envs at once (``[[sft.mix]]``) records one
setting per env. Zoo builds, real checkpoints and SFT models from before the key record nothing
and are never refused (nor is a joint model on an env it never learned).
"""

from pathlib import Path

from services.errors import ConflictError
from services.models.build import read_manifest
from services.models.registry import resolve_model_dir

TASK_REMINDER_ENV = "TURNOPD_ROLLOUT__TASK_REMINDER"


def trained_task_reminder(directory: Path, env: str | None = None) -> bool | None:
    """The ``task_reminder`` a checkpoint's manifest records (for ``env``, if it records one per
    env); None when it records none."""
    manifest = read_manifest(directory) or {}
    value = manifest.get("task_reminder")
    if isinstance(value, dict):
        value = value.get(env) if env is not None else None
    return value if isinstance(value, bool) else None


def learned_per_env(reference: str, cache_dir: Path | None) -> bool:
    """Whether ``reference`` records its format per env (a joint model of ``[[sft.mix]]``)."""
    manifest = read_manifest(resolve_model_dir(reference, cache_dir)) or {}
    return isinstance(manifest.get("task_reminder"), dict)


def check_task_reminder(reference: str, cache_dir: Path | None, wanted: bool, env: str | None = None) -> Path:
    """The checkpoint directory of ``reference``; refused if it was trained in another format (on ``env``)."""
    directory = resolve_model_dir(reference, cache_dir)
    trained = trained_task_reminder(directory, env)
    if trained is None or trained == wanted:
        return directory
    flag = str(trained).lower()
    where = f" on {env}" if learned_per_env(reference, cache_dir) else ""
    sources = f", or in the [[sources]] entry of {env} in a run of several envs" if env else ""
    raise ConflictError(
        f"model {reference!r} was trained with rollout.task_reminder = {flag}{where}, but these settings "
        f"have {str(wanted).lower()}; set task_reminder = {flag} in the config's [rollout] section "
        f"(or {TASK_REMINDER_ENV}={flag}){sources}"
    )
