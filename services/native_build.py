"""Building one of our C sources for this machine on first use, into the cache root, and loading it
through ``ctypes`` (the rollout's decode kernels, the teacher codec's reader and writer).

A library goes to ``<cache root>/kernels/<name>-<key>.so``, where the key hashes the source, the
flags and this CPU's model and feature flags (a cache shared by machines of other CPUs builds one
library per kind). It is built with ``$CC``, else ``cc``. A build writes a private file and renames
it into place, so processes that start together may all build, and none reads a half-written
library. Where there is no compiler or the build fails, ``NativeBuildError`` says why; the callers
then keep their Python or torch path, which computes the same.
"""

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

BUILD_TIMEOUT_S = 120.0


class NativeBuildError(RuntimeError):
    """A library could not be built or loaded here (the message says why)."""


@dataclass(frozen=True)
class NativeSource:
    """A C source of ours, the name its libraries take, and the flags it is built with."""

    path: Path
    name: str
    flags: tuple[str, ...]

    def library_path(self, cache_root: Path) -> Path:
        """Where the library for this source, these flags and this CPU lives under ``cache_root``."""
        key = hashlib.sha256(
            self.path.read_bytes() + "\0".join(self.flags).encode() + machine_signature().encode()
        ).hexdigest()[:16]
        return cache_root / "kernels" / f"{self.name}-{key}.so"


def compiler() -> str | None:
    """The C compiler to build with: ``$CC``, else ``cc`` on the PATH (None: neither)."""
    name = os.environ.get("CC") or "cc"
    return shutil.which(name)


@functools.cache
def machine_signature() -> str:
    """This CPU's model and feature flags (what ``-march=native`` compiles for)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    wanted = ("model name", "flags", "Features", "CPU part")
    seen = {line.split(":", 1)[0].strip(): line for line in lines if line.split(":", 1)[0].strip() in wanted}
    return f"{platform.machine()} " + " | ".join(seen[k] for k in sorted(seen))


def build(source: NativeSource, cache_root: Path) -> Path:
    """The compiled library of ``source`` under ``cache_root`` (built now if it is not there yet)."""
    target = source.library_path(cache_root)
    if target.exists():
        return target
    cc = compiler()
    if cc is None:
        raise NativeBuildError(f"no C compiler ({os.environ.get('CC') or 'cc'} is not on the PATH)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=target.stem + ".", suffix=".partial", dir=target.parent)
    except OSError as exc:
        raise NativeBuildError(f"cannot write the library into {target.parent}: {exc}") from None
    os.close(fd)
    try:
        try:
            done = subprocess.run(
                [cc, *source.flags, str(source.path), "-o", partial],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NativeBuildError(f"{cc} could not build {source.path.name}: {exc}") from None
        if done.returncode != 0:
            raise NativeBuildError(
                f"{cc} could not build {source.path.name} (exit {done.returncode}): {done.stderr.strip()[-800:]}"
            )
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def load(source: NativeSource, cache_root: Path) -> tuple[Path, ctypes.CDLL]:
    """``build`` then load: the library's path and the library; ``NativeBuildError`` when either
    fails."""
    path = build(source, cache_root)
    try:
        return path, ctypes.CDLL(str(path))
    except OSError as exc:
        raise NativeBuildError(f"cannot load {path}: {exc}") from None
