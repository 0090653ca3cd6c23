"""Write a directory all at once: fill a sibling temp dir, then swap it in place of the target.

A crash while filling never leaves a half-written directory under the target's name, and readers
of the target see either the old one or the new one.
"""

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_directory(target: Path) -> Iterator[Path]:
    """Yield an empty sibling directory to fill; on success it replaces ``target``, on error it goes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; these directories are shared read-only artefacts
    try:
        yield tmp
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            target.rename(old / target.name)
            shutil.rmtree(old)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
