"""Package a trained checkpoint as a shipped artifact: bf16 weights, its files and a checksummed manifest.

The weights are stored in bf16 to keep the repository small; ``config.json`` keeps the dtype the
model was trained in, so loaders that ask for float32 (the CPU default) upcast them. The source's
own manifest (``turnopd_build.json``: base, recipe settings, ``task_reminder``) travels unchanged,
so every check that reads it still applies. The measured success recorded in the manifest must be
measured on the shipped weights, not the source's: ``turnopd eval --json`` of the artifact.
"""

import json
import shutil
from pathlib import Path
from typing import Any

from services.atomic_directory import atomic_directory
from services.contracts.rollout import EvalReport
from services.errors import ConflictError, InputError
from services.models import shipped
from services.models.shipped import ARTIFACT_FORMAT, ARTIFACT_MANIFEST, file_sha256

WEIGHTS_FILE = "model.safetensors"
# What a shipped checkpoint carries besides the weights; training leftovers are not shipped.
CHECKPOINT_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "turnopd_build.json",
)


def _cast_weights(source: Path, target: Path, dtype_name: str) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}.get(dtype_name)
    if dtype is None:
        raise InputError(f"shipped dtype must be bfloat16 or float32, not {dtype_name!r}")
    tensors = load_file(source)
    cast = {k: (v.to(dtype) if v.is_floating_point() else v).contiguous() for k, v in tensors.items()}
    save_file(cast, target, metadata={"format": "pt"})


def measured_entry(report: EvalReport, command: str) -> dict[str, Any]:
    """What the manifest records of an evaluation of the shipped weights."""
    return {
        "command": command,
        "env": report.env,
        "split": report.split,
        "games": report.overall.tasks,
        "n": report.n,
        "temperature": report.temperature,
        "max_turns": report.max_turns,
        "seed": report.seed,
        "success_rate": report.overall.success_rate,
        "successes": report.overall.successes,
        "episodes": report.overall.episodes,
        "per_task_type": {k: v.success_rate for k, v in report.per_task_type.items()},
    }


def ship_model(
    source: Path,
    name: str,
    *,
    recipe: list[str],
    description: str,
    dtype: str = "bfloat16",
    measured: dict[str, Any] | None = None,
    root: Path | None = None,
    replace: bool = False,
) -> Path:
    """Write ``root/name`` from the checkpoint at ``source``; returns the artifact directory."""
    if not (source / WEIGHTS_FILE).is_file():
        raise InputError(f"{source} is not a single-file safetensors checkpoint (no {WEIGHTS_FILE})")
    if not recipe:
        raise InputError("a shipped model needs the recipe commands that reproduce it (--recipe)")
    root = root or shipped.SHIPPED_ROOT
    target = root / name
    if target.exists() and not replace:
        raise ConflictError(f"{target} exists; pass --replace to overwrite the shipped model {name!r}")
    with atomic_directory(target) as tmp:
        _cast_weights(source / WEIGHTS_FILE, tmp / WEIGHTS_FILE, dtype)
        for file_name in CHECKPOINT_FILES:
            if (source / file_name).is_file():
                shutil.copyfile(source / file_name, tmp / file_name)
        files = {p.name: file_sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        manifest = {
            "format": ARTIFACT_FORMAT,
            "name": name,
            "description": description,
            "weights_dtype": dtype,
            "recipe": recipe,
            "measured": measured,
            "files": files,
        }
        (tmp / ARTIFACT_MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return target


def record_measurement(directory: Path, report: EvalReport, command: str) -> dict[str, Any]:
    """Set the manifest's ``measured`` entry of the artifact at ``directory`` (its files verified first)."""
    from services.models.shipped import read_artifact_manifest, verify_files

    manifest = read_artifact_manifest(directory)
    verify_files(directory, manifest["files"])
    manifest["measured"] = measured_entry(report, command)
    (directory / ARTIFACT_MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
