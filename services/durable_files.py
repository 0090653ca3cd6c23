"""Writes that survive a crash or a power loss: each is on disk, names included, once it returns.

A rename or a new file is only durable once its directory is synced too, so every helper syncs the
directory it changed. ``replace_text`` leaves the old text or the new one under the name, never a mix.
"""

import os
import uuid
from pathlib import Path


def fsync_directory(directory: Path) -> None:
    """Make the entries of ``directory`` (files created, renamed or removed in it) durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(directory: Path) -> None:
    """Sync every file under ``directory``, each directory's entries, then ``directory`` itself."""
    for path in sorted(directory.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as fh:
                os.fsync(fh.fileno())
    for sub in sorted((p for p in directory.rglob("*") if p.is_dir()), reverse=True):
        fsync_directory(sub)
    fsync_directory(directory)


def replace_text(path: Path, text: str) -> None:
    """Replace ``path``'s text atomically and durably: a synced sibling temp file renamed over it."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # not mkstemp: keep the umask's mode
    try:
        with tmp.open("x", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def append_line(path: Path, line: str) -> None:
    """Append ``line`` and a newline to ``path`` (created if missing) and sync it before returning."""
    created = not path.exists()
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    if created:
        fsync_directory(path.parent)
