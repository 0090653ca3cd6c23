"""Where models live: the cache root, and a model name or path resolved to its checkpoint directory.

A model reference is either a name or a path to a Hugging Face checkpoint directory (real Qwen3
checkpoints included). References containing a path separator, or starting with ``.`` or ``~``,
are paths. A name resolves to ``<cache>/models/<name>`` (``teacher``, ``student``, or any name
later steps save there) when that exists, else to the artifact shipped in the repository under
that name (``artifacts/models/<name>``, checksums verified: services.models.shipped).
"""

import os
from pathlib import Path

from services.cache_dir import resolve_cache_dir
from services.errors import InputError, NotFoundError
from services.models.shipped import shipped_model, shipped_names


def models_dir(cache_dir: Path | None = None) -> Path:
    """The directory holding named checkpoints."""
    return resolve_cache_dir(cache_dir) / "models"


def is_path_reference(reference: str) -> bool:
    return os.sep in reference or "/" in reference or reference.startswith((".", "~"))


def model_dir(reference: str, cache_dir: Path | None = None) -> Path:
    """The directory ``reference`` names, whether or not it exists yet."""
    if not reference:
        raise InputError("a model reference must not be empty")
    if is_path_reference(reference):
        return Path(reference).expanduser()
    return models_dir(cache_dir) / reference


def resolve_model_dir(reference: str, cache_dir: Path | None = None) -> Path:
    """The existing checkpoint directory (with a ``config.json``) that ``reference`` names.

    A name missing from the cache falls back to the shipped artifact of that name, verified.
    """
    path = model_dir(reference, cache_dir)
    if (path / "config.json").is_file():
        return path
    if is_path_reference(reference):
        raise NotFoundError(f"no model checkpoint at {path} (model {reference!r})")
    shipped = shipped_model(reference)
    if shipped is not None:
        return shipped.path
    raise NotFoundError(
        f"no model checkpoint at {path} (model {reference!r}) and none shipped under that name "
        f"(shipped: {', '.join(shipped_names()) or 'none'}); run `turnopd models build` for the zoo"
    )
