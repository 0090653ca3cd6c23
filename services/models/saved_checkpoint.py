"""Save a trained or derived model (`turnopd teacher train`, `turnopd models perturb`) as a Hugging
Face checkpoint (weights, config, tokenizer) under a zoo name.

The directory is written next to its final place and renamed in, so a crash never leaves a half
checkpoint; it carries a manifest (``turnopd_build.json``, as zoo builds do) saying what it was
trained from. The zoo's own ``teacher``/``student`` directories are never written here: their
manifests are what `turnopd models build` checks.
"""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.atomic_directory import atomic_directory
from services.errors import ConflictError
from services.models.build import MANIFEST
from services.models.registry import model_dir
from services.models.zoo import ZOO

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def checkpoint_target(reference: str, cache_dir: Path | None = None) -> Path:
    """Where ``reference`` (zoo name or path) is saved; the zoo's built-in names are refused."""
    if reference in ZOO:
        raise ConflictError(
            f"{reference!r} is a zoo model built by `turnopd models build`; save trained weights under another name"
        )
    return model_dir(reference, cache_dir)


def save_checkpoint(
    model: "PreTrainedModel",
    tokenizer: "PreTrainedTokenizerBase",
    target: Path,
    manifest: dict[str, Any],
) -> Path:
    """Write model, tokenizer and manifest to ``target`` atomically (replacing what was there)."""
    with atomic_directory(target) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return target
