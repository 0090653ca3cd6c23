"""Learner checkpoints on disk, Hugging Face loadable: ``RUN_DIR/checkpoints/step_000010/``.

Each holds ``config.json`` + ``model.safetensors`` (+ the base model's tokenizer files), the
optimizer state (``optimizer.pt``), the RNG state (``rng.pt``) and ``trainer_state.json``
(step, run id). A checkpoint is written into a temporary directory and renamed into place, so a
crash mid-write never leaves a half checkpoint that looks complete.
"""

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import nn

STATE_FILE = "trainer_state.json"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return run_dir / "checkpoints" / f"step_{step:06d}"


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The complete checkpoint with the highest step, or None."""
    root = run_dir / "checkpoints"
    if not root.is_dir():
        return None
    done = sorted(p for p in root.glob("step_*") if (p / STATE_FILE).is_file())
    return done[-1] if done else None


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


def read_state(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((path / STATE_FILE).read_text())
    return data


def save_checkpoint(
    run_dir: Path,
    step: int,
    model: nn.Module,
    model_state: dict[str, torch.Tensor],
    optimizer_state: dict[str, Any],
    run_id: str,
    base_model_dir: Path | None,
    keep: int,
) -> Path:
    """Write a complete checkpoint atomically and prune all but the ``keep`` newest."""
    final = checkpoint_dir(run_dir, step)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, state_dict=model_state)  # type: ignore[operator]
    if base_model_dir is not None:
        for name in TOKENIZER_FILES:
            if (base_model_dir / name).is_file():
                shutil.copy2(base_model_dir / name, tmp / name)
    torch.save(optimizer_state, tmp / "optimizer.pt")
    torch.save({"torch": torch.get_rng_state()}, tmp / "rng.pt")
    (tmp / STATE_FILE).write_text(json.dumps({"step": step, "run_id": run_id}))
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for old in sorted(p for p in final.parent.glob("step_*") if (p / STATE_FILE).is_file())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final
