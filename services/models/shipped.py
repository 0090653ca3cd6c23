"""Model artifacts shipped in the repository: ``artifacts/models/<name>/``, verified before use.

A shipped artifact is a Hugging Face checkpoint directory (bf16 safetensors, config, tokenizer)
plus a manifest (``turnopd_artifact.json``) that records the recipe commands that reproduce it,
the success it measured and a sha256 per file. A name resolves to a shipped artifact when no
checkpoint of that name sits in the cache (a model you trained yourself wins), and its files are
checked against the manifest once per process before it is used: a mismatch names the file.
"""

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from services.errors import InputError, NotFoundError

SHIPPED_ROOT = Path(__file__).resolve().parents[2] / "artifacts" / "models"
ARTIFACT_MANIFEST = "turnopd_artifact.json"
ARTIFACT_FORMAT = 1


class IntegrityError(InputError):
    """A shipped file differs from the sha256 its manifest records (or is missing)."""


@dataclass(frozen=True)
class ShippedModel:
    """One shipped artifact: its directory and its parsed manifest."""

    name: str
    path: Path
    manifest: dict[str, Any]

    @property
    def measured(self) -> dict[str, Any] | None:
        value = self.manifest.get("measured")
        return value if isinstance(value, dict) else None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_artifact_manifest(directory: Path) -> dict[str, Any]:
    path = directory / ARTIFACT_MANIFEST
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise IntegrityError(f"shipped model at {directory} has no {ARTIFACT_MANIFEST}") from exc
    except json.JSONDecodeError as exc:
        raise IntegrityError(f"{path} is not valid JSON: {exc}") from exc
    if manifest.get("format") != ARTIFACT_FORMAT or not isinstance(manifest.get("files"), dict):
        raise IntegrityError(f"{path}: not a format-{ARTIFACT_FORMAT} artifact manifest with a 'files' table")
    return manifest


def verify_files(directory: Path, files: dict[str, str]) -> None:
    """Every listed file exists with its sha256, and nothing unlisted sits beside them."""
    for relative, expected in sorted(files.items()):
        path = directory / relative
        if not path.is_file():
            raise IntegrityError(f"shipped file missing: {path}")
        actual = file_sha256(path)
        if actual != expected:
            raise IntegrityError(
                f"checksum mismatch in {path}: sha256 {actual}, the manifest says {expected} "
                "(the file was changed or is a Git LFS pointer; restore it with `git checkout -- <file>`)"
            )
    unlisted = sorted(
        p.name
        for p in directory.iterdir()
        if p.is_file() and p.name != ARTIFACT_MANIFEST and p.name not in files
    )
    if unlisted:
        raise IntegrityError(
            f"shipped model at {directory} holds files its manifest does not list: {unlisted}"
        )


@cache
def _verified(directory: Path, stamp: tuple[tuple[str, int, int], ...]) -> dict[str, Any]:
    manifest = read_artifact_manifest(directory)
    verify_files(directory, manifest["files"])
    return manifest


def _stamp(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """Name, size and mtime of every file: a changed file is verified again."""
    return tuple(
        (p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(directory.iterdir()) if p.is_file()
    )


def shipped_model(name: str, root: Path | None = None) -> ShippedModel | None:
    """The verified shipped artifact called ``name``, or None when none is shipped under that name."""
    directory = (root or SHIPPED_ROOT) / name
    if not (directory / ARTIFACT_MANIFEST).is_file():
        return None
    return ShippedModel(name, directory, _verified(directory, _stamp(directory)))


def shipped_names(root: Path | None = None) -> list[str]:
    root = root or SHIPPED_ROOT
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / ARTIFACT_MANIFEST).is_file())


def require_shipped(name: str, root: Path | None = None) -> ShippedModel:
    found = shipped_model(name, root)
    if found is None:
        where = root or SHIPPED_ROOT
        raise NotFoundError(
            f"no shipped model {name!r} under {where}; shipped: {shipped_names(root) or 'none'}"
        )
    return found


def measured_success(directory: Path) -> dict[str, Any] | None:
    """The ``measured`` entry of the shipped artifact at ``directory``; None for any other checkpoint."""
    if not (directory / ARTIFACT_MANIFEST).is_file():
        return None
    measured = read_artifact_manifest(directory).get("measured")
    return measured if isinstance(measured, dict) else None
