"""On-disk game cache: games are generated once, written atomically, and reused by every worker.

Workers of several replicas may want the same missing game at once: generation runs under an
exclusive file lock and the result is renamed into place, so readers never see a partial file.
"""

import fcntl
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (created if needed) while the block runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same directory and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def ensure_file(path: Path, build: Callable[[Path], None]) -> tuple[Path, bool]:
    """Return ``path``, first running ``build(path)`` under a lock if it does not exist yet.

    The second item says whether this call built it. ``build`` must create ``path`` atomically.
    """
    if path.exists():
        return path, False
    with file_lock(path.with_name(path.name + ".lock")):
        if path.exists():
            return path, False
        build(path)
        if not path.exists():
            raise RuntimeError(f"game builder did not create {path}")
        return path, True
