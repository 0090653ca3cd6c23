"""Building a C source of ours into the cache root: keyed by source and flags, built once, loaded; a
failure is a NativeBuildError that says why."""

import ctypes
from pathlib import Path

import pytest

from services.native_build import NativeBuildError, NativeSource, build, load


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
    assert list((tmp_path / "cache" / "kernels").iterdir()) == []


def test_a_cache_root_it_cannot_write_is_a_build_error_naming_it(tmp_path: Path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with pytest.raises(NativeBuildError, match=r"cannot write the library into .*file/kernels"):
        build(_source(tmp_path), blocked)
