"""Building a C source of ours into the cache root: keyed by source and flags, built once, loaded; a
failure is a NativeBuildError that says why."""

import ctypes
import hashlib
import os
from pathlib import Path

import pytest

from services import native_build
from services.native_build import NativeBuildError, NativeSource, build, digest_path, load


def _source(tmp_path: Path, body: str = "int twice(int x) { return 2 * x; }\n") -> NativeSource:
    path = tmp_path / "twice.c"
    path.write_text(body)
    return NativeSource(path, "twice", ("-O2", "-fPIC", "-shared"))


def test_a_source_builds_once_into_its_keyed_path_and_loads(tmp_path: Path):
    source = _source(tmp_path)
    root = tmp_path / "cache"
    built = build(source, root)
    assert built == source.library_path(root) and built.name.startswith("twice-") and built.exists()
    stamp = built.stat().st_mtime_ns
    assert build(source, root) == built and built.stat().st_mtime_ns == stamp  # found, not rebuilt
    _, lib = load(source, root)
    lib.twice.argtypes, lib.twice.restype = [ctypes.c_int], ctypes.c_int
    assert lib.twice(21) == 42
    other_flags = NativeSource(source.path, source.name, ("-O1", "-fPIC", "-shared"))
    assert other_flags.library_path(root) != built
    source.path.write_text("int twice(int x) { return x + x; }\n")
    assert source.library_path(root) != built  # another source, another library


def test_a_source_that_does_not_compile_names_the_compilers_complaint(tmp_path: Path):
    source = _source(tmp_path, "int twice(int x) { return 2 * ; }\n")
    with pytest.raises(
        NativeBuildError, match=r"(?s)could not build twice.c \(exit 1\): .*error: expected expression"
    ):
        build(source, tmp_path / "cache")
    assert list((tmp_path / "cache" / "kernels").iterdir()) == []  # no library, no digest, no partial


def test_a_cache_root_it_cannot_write_is_a_build_error_naming_it(tmp_path: Path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with pytest.raises(NativeBuildError, match=r"cannot write the library into .*file/kernels"):
        build(_source(tmp_path), blocked)


def test_the_library_directory_is_created_private_and_one_open_to_others_is_closed(tmp_path: Path, caplog):
    source = _source(tmp_path)
    built = build(source, tmp_path / "cache")
    assert built.parent.stat().st_mode & 0o777 == 0o700
    built.parent.chmod(0o777)
    with caplog.at_level("WARNING"):
        assert build(source, tmp_path / "cache") == built
    assert built.parent.stat().st_mode & 0o777 == 0o700
    assert "was open to other users (mode 777): made private (0700)" in caplog.text


@pytest.mark.skipif(os.getuid() != 0, reason="giving a directory to another user needs root")
def test_a_library_directory_another_user_owns_is_refused(tmp_path: Path):
    source = _source(tmp_path)
    built = build(source, tmp_path / "cache")
    os.chown(built.parent, 65534, -1)
    with pytest.raises(
        NativeBuildError, match=r"kernels belongs to user 65534, not this user \(0\): no library is loaded"
    ):
        load(source, tmp_path / "cache")


def test_a_library_whose_bytes_differ_from_its_recorded_digest_is_built_again(tmp_path: Path, caplog):
    """Anything that replaced or damaged the file (a foreign library at our name, a truncated copy)
    is not loaded: the digest its build recorded no longer matches, so it is built again."""
    source = _source(tmp_path)
    built = build(source, tmp_path / "cache")
    record = digest_path(built)
    assert record.read_text().strip() == hashlib.sha256(built.read_bytes()).hexdigest()
    good = built.read_bytes()
    built.write_bytes(good[: len(good) // 2])  # truncated
    with caplog.at_level("WARNING"):
        _, lib = load(source, tmp_path / "cache")
    assert "does not match the digest its build recorded: building it again" in caplog.text
    assert hashlib.sha256(built.read_bytes()).hexdigest() == record.read_text().strip()
    lib.twice.argtypes, lib.twice.restype = [ctypes.c_int], ctypes.c_int
    assert lib.twice(4) == 8
    record.unlink()
    caplog.clear()
    with caplog.at_level("WARNING"):
        build(source, tmp_path / "cache")
    assert "has no recorded digest: building it again" in caplog.text and record.exists()


def test_a_cpu_of_other_features_gets_its_own_library(tmp_path: Path, monkeypatch):
    source = _source(tmp_path)
    here = build(source, tmp_path / "cache")
    monkeypatch.setattr(native_build, "machine_signature", lambda: "x86_64 | flags : fpu sse2")
    other = build(source, tmp_path / "cache")
    assert other != here and other.exists() and here.exists()


def test_a_sanitized_build_is_keyed_apart_and_carries_the_sanitizer_flags(tmp_path: Path, monkeypatch):
    source = _source(tmp_path)
    monkeypatch.delenv(native_build.SANITIZE_ENV, raising=False)
    plain = source.library_path(tmp_path)
    monkeypatch.setenv(native_build.SANITIZE_ENV, "address,undefined")
    assert source.build_flags()[-4:] == (
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-fno-omit-frame-pointer",
        "-g",
    )
    assert source.library_path(tmp_path) != plain
    monkeypatch.setenv(native_build.SANITIZE_ENV, "")
    assert source.build_flags() == source.flags and source.library_path(tmp_path) == plain
