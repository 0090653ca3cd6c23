"""Learner checkpoints on disk, Hugging Face loadable: ``RUN_DIR/checkpoints/step_000010/``.

Each holds ``config.json`` + ``model.safetensors`` (+ the base model's tokenizer files), the
optimizer state (``optimizer.pt``), the RNG state (``rng.pt``) and ``trainer_state.json`` (step,
run id, each other file's size), written last. A checkpoint is written into a temporary directory,
synced, renamed into place and its parent synced, so a crash or a power loss never leaves a half
checkpoint that looks complete; one damaged later on fails ``verify_checkpoint`` and a resume
falls back to the one before (``newest_loadable``).

A checkpoint is pruned only once a newer one is logged: the learner saves step k before the
driver logs it, so the driver prunes (``prune_checkpoints``) after it has logged step k. Pruning
at the save would leave, after a crash between the two, only a checkpoint of a step the logs lack.
"""

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from services.durable_files import fsync_directory, fsync_tree
from services.errors import InputError

STATE_FILE = "trainer_state.json"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)
# What a checkpoint saved before the state recorded its files' sizes must hold to be loaded.
LOADED_FILES = ("config.json", "optimizer.pt", "rng.pt")

log = logging.getLogger(__name__)
T = TypeVar("T")


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"step_{step:06d}"


def _step_of(path: Path) -> int | None:
    """The step of a checkpoint directory's name (``step_000010``); None for anything else (a .tmp)."""
    digits = path.name.removeprefix("step_")
    return int(digits) if path.name.startswith("step_") and digits.isdigit() else None


def checkpoint_step(path: Path) -> int:
    """The step of a checkpoint in ``complete_checkpoints``' list (from its directory's name)."""
    step = _step_of(path)
    if step is None:
        raise InputError(f"{path} is not a checkpoint directory (step_NNNNNN)")
    return step


def complete_checkpoints(run_dir: Path) -> list[Path]:
    """The renamed-into-place checkpoints (a state file, not .tmp), newest first; not yet verified."""
    root = run_dir / "checkpoints"
    if not root.is_dir():
        return []
    found = [(step, p) for p in root.glob("step_*") if (step := _step_of(p)) is not None]
    return [p for _, p in sorted(found, reverse=True) if (p / STATE_FILE).is_file()]


def verify_checkpoint(path: Path) -> None:
    """A cheap integrity check (no tensor is read): InputError naming what is missing or damaged.

    Every file the state records has its recorded size, and every safetensors header parses. A
    checkpoint saved before sizes were recorded has them unknown: its loaded files must exist.
    """
    from safetensors import SafetensorError, safe_open

    sizes: dict[str, int | None] | None = read_state(path).get("files")
    expected = sizes if sizes is not None else dict.fromkeys(LOADED_FILES)
    for name, size in expected.items():
        file = path / name
        if not file.is_file():
            raise InputError(f"{file} is missing")
        if size is not None and file.stat().st_size != size:
            raise InputError(f"{file} has {file.stat().st_size} bytes, not the {size} saved")
    weights = sorted(path.glob("*.safetensors"))
    if not weights:
        raise InputError(f"{path} holds no model weights (*.safetensors)")
    for file in weights:
        try:
            with safe_open(str(file), "pt"):
                pass
        except SafetensorError as exc:
            raise InputError(f"{file} does not load: {exc}") from None


def latest_checkpoint(run_dir: Path, at_most: int | None = None) -> Path | None:
    """The newest checkpoint (of a step at most ``at_most``) that passes ``verify_checkpoint``, or None."""
    for path in complete_checkpoints(run_dir):
        if at_most is not None and checkpoint_step(path) > at_most:
            continue
        try:
            verify_checkpoint(path)
        except InputError:
            continue
        return path
    return None


def newest_loadable(run_dir: Path, load: Callable[[Path], T]) -> tuple[Path, T] | None:
    """The newest checkpoint that passes ``verify_checkpoint`` and ``load`` (which raises InputError on a
    damaged file) and what ``load`` gave; each one skipped is logged with the reason. None: none loads."""
    for path in complete_checkpoints(run_dir):
        try:
            verify_checkpoint(path)
            return path, load(path)
        except InputError as exc:
            log.warning("skipped the damaged checkpoint %s (%s); trying the one before", path.name, exc)
    return None


def read_training_state(path: Path) -> tuple[dict[str, Any], torch.Tensor]:
    """A checkpoint's optimizer state and torch RNG state; InputError when either file is damaged."""
    try:
        optimizer_state: dict[str, Any] = torch.load(path / "optimizer.pt", weights_only=False)
        rng_state: torch.Tensor = torch.load(path / "rng.pt")["torch"]
    except Exception as exc:  # translated once, here
        # torch.load of a truncated or overwritten file raises whatever its unpickler meets: RuntimeError
        # (zip), UnpicklingError, EOFError, KeyError, TypeError...
        raise InputError(
            f"{path}: the optimizer or RNG state does not load ({type(exc).__name__}: {exc})"
        ) from None
    return optimizer_state, rng_state


def drop_checkpoints_after(run_dir: Path, step: int) -> list[Path]:
    """Delete every checkpoint (complete or not) of a step beyond ``step``; return what was deleted."""
    root = run_dir / "checkpoints"
    if not root.is_dir():
        return []
    dropped = []
    for path in sorted(root.glob("step_*")):
        digits = path.name.removeprefix("step_").removesuffix(".tmp")
        if digits.isdigit() and int(digits) > step:
            shutil.rmtree(path)
            dropped.append(path)
    return dropped


def prune_checkpoints(run_dir: Path, keep: int, logged_step: int) -> list[Path]:
    """After the driver logged ``logged_step``: delete all but the ``keep`` newest complete checkpoints
    at or below it (never one above it: its step is not logged yet); return what was deleted."""
    logged = [p for p in complete_checkpoints(run_dir) if checkpoint_step(p) <= logged_step]
    pruned = logged[keep:]
    for path in pruned:
        shutil.rmtree(path)
    if pruned:
        fsync_directory(run_dir / "checkpoints")
    return pruned


def read_state(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((path / STATE_FILE).read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path / STATE_FILE} is damaged: {exc}") from None
    return data


def save_checkpoint(
    run_dir: Path,
    step: int,
    model: nn.Module,
    model_state: dict[str, torch.Tensor],
    optimizer_state: dict[str, Any],
    run_id: str,
    base_model_dir: Path | None,
) -> Path:
    """Write a complete checkpoint atomically and durably; pruning is the driver's (``prune_checkpoints``)."""
    final = checkpoint_dir(run_dir, step)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    created = not tmp.parent.is_dir()
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, state_dict=model_state)  # type: ignore[operator]
    if base_model_dir is not None:
        for name in TOKENIZER_FILES:
            if (base_model_dir / name).is_file():
                shutil.copy2(base_model_dir / name, tmp / name)
    torch.save(optimizer_state, tmp / "optimizer.pt")
    torch.save({"torch": torch.get_rng_state()}, tmp / "rng.pt")
    sizes = {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.is_file()}
    (tmp / STATE_FILE).write_text(json.dumps({"step": step, "run_id": run_id, "files": sizes}))
    fsync_tree(tmp)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    fsync_directory(final.parent)
    if created:
        fsync_directory(run_dir)
    return final
