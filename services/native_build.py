"""Building one of our C sources for this machine on first use, into the cache root, and loading it
through ``ctypes`` (the rollout's decode kernels, the teacher codec's reader and writer).

A library goes to ``<cache root>/kernels/<name>-<key>.so``, where the key hashes the source, the
flags and this CPU's model and feature flags (``-march=native`` builds differ by CPU, so a cache
shared by machines of other CPUs builds one library per kind). It is built with ``$CC``, else
``cc``. A build writes a private file and renames it into place, so processes that start together
may all build, and none reads a half-written library.

Loading a library runs its code in this process, so where it loads from is guarded:

* ``<cache root>/kernels`` is created readable and writable by this user only (``0700``), and one
  that another user owns, or that others may write, is refused (one of ours too open is closed);
* beside each library its build records the SHA-256 of what it wrote (``.so.sha256``); a library
  is loaded only if its bytes have that digest, else it is built again (a warning says so).

``TURNOPD_NATIVE_SANITIZE`` (for example ``address,undefined``) builds every library with
``-fsanitize=`` those, keyed apart from the plain builds; running them needs the sanitizer's runtime
preloaded (``scripts/test_sanitized.sh``, docs/development.md).

Where there is no compiler or the build fails, ``NativeBuildError`` says why; the callers then keep
their Python or torch path, which computes the same. Building at install time instead (a wheel, or
``pip install`` compiling) was weighed and not taken: ``-march=native`` is what makes the kernels
fast, and a wheel must target a baseline CPU; a build at first use takes about a second.
"""

import ctypes
import functools
import hashlib
import logging
import os
import platform
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

BUILD_TIMEOUT_S = 120.0
SANITIZE_ENV = "TURNOPD_NATIVE_SANITIZE"

log = logging.getLogger(__name__)


class NativeBuildError(RuntimeError):
    """A library could not be built or loaded here (the message says why)."""


@dataclass(frozen=True)
class NativeSource:
    """A C source of ours, the name its libraries take, and the flags it is built with."""

    path: Path
    name: str
    flags: tuple[str, ...]

    def build_flags(self) -> tuple[str, ...]:
        """The flags, with ``-fsanitize=...`` added where ``$TURNOPD_NATIVE_SANITIZE`` asks."""
        return self.flags + sanitizer_flags()

    def library_path(self, cache_root: Path) -> Path:
        """Where the library for this source, these flags and this CPU lives under ``cache_root``."""
        key = hashlib.sha256(
            self.path.read_bytes() + "\0".join(self.build_flags()).encode() + machine_signature().encode()
        ).hexdigest()[:16]
        return cache_root / "kernels" / f"{self.name}-{key}.so"


def sanitizer_flags() -> tuple[str, ...]:
    """``-fsanitize=<$TURNOPD_NATIVE_SANITIZE>`` and what makes its reports useful and fatal (none
    where the variable is unset or empty)."""
    wanted = os.environ.get(SANITIZE_ENV, "").strip()
    if not wanted:
        return ()
    return (f"-fsanitize={wanted}", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g")


def digest_path(library: Path) -> Path:
    """Where the digest a build recorded for ``library`` lives."""
    return library.with_name(library.name + ".sha256")


def private_directory(directory: Path) -> Path:
    """``directory``, created ``0700`` if it is not there; ``NativeBuildError`` if another user owns
    it or it is not a directory; made ``0700`` if it is ours and others may write into it."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.lstat()
    except OSError as exc:
        raise NativeBuildError(f"cannot write the library into {directory}: {exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise NativeBuildError(f"cannot write the library into {directory}: not a directory")
    if info.st_uid != os.getuid():
        raise NativeBuildError(
            f"{directory} belongs to user {info.st_uid}, not this user ({os.getuid()}): no library is "
            "loaded from a directory another user can write (set TURNOPD_CACHE_DIR to one of yours)"
        )
    if info.st_mode & 0o077:
        log.warning(
            "%s was open to other users (mode %o): made private (0700)", directory, info.st_mode & 0o777
        )
        try:
            directory.chmod(0o700)
        except OSError as exc:
            raise NativeBuildError(f"cannot make {directory} private: {exc}") from None
    return directory


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _recorded_and_intact(target: Path) -> bool:
    """Whether ``target`` exists with the digest its build recorded (a warning where it exists
    without it)."""
    if not target.exists():
        return False
    try:
        recorded = digest_path(target).read_text().strip()
        intact = recorded == _sha256(target)
    except OSError:
        recorded, intact = "", False
    if not intact:
        why = "has no recorded digest" if not recorded else "does not match the digest its build recorded"
        log.warning("%s %s: building it again", target, why)
    return intact


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
    if target.parent.is_dir():  # a library there is trusted only in a private directory
        private_directory(target.parent)
        if _recorded_and_intact(target):
            return target
    cc = compiler()
    if cc is None:
        raise NativeBuildError(f"no C compiler ({os.environ.get('CC') or 'cc'} is not on the PATH)")
    private_directory(target.parent)
    try:
        fd, partial = tempfile.mkstemp(prefix=target.stem + ".", suffix=".partial", dir=target.parent)
    except OSError as exc:
        raise NativeBuildError(f"cannot write the library into {target.parent}: {exc}") from None
    os.close(fd)
    record = partial + ".sha256"
    try:
        try:
            done = subprocess.run(
                [cc, *source.build_flags(), str(source.path), "-o", partial],
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
        Path(record).write_text(_sha256(Path(partial)) + "\n")
        os.replace(partial, target)  # the library first: a reader that finds the record finds it
        os.replace(record, digest_path(target))
    finally:
        for leftover in (partial, record):
            if os.path.exists(leftover):
                os.unlink(leftover)
    return target


def load(source: NativeSource, cache_root: Path) -> tuple[Path, ctypes.CDLL]:
    """``build`` then load: the library's path and the library; ``NativeBuildError`` when either
    fails. The library is loaded only with the digest its build recorded."""
    path = build(source, cache_root)
    try:
        return path, ctypes.CDLL(str(path))
    except OSError as exc:
        raise NativeBuildError(f"cannot load {path}: {exc}") from None
