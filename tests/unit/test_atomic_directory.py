"""A directory written all at once: the target holds the old or the new contents, never a mix."""

from pathlib import Path

import pytest

from services.atomic_directory import atomic_directory


def test_the_new_contents_replace_the_old_and_no_temp_dir_is_left(tmp_path: Path):
    target = tmp_path / "ckpt"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with atomic_directory(target) as tmp:
        assert tmp.parent == tmp_path and tmp != target and not any(tmp.iterdir())
        (tmp / "new.txt").write_text("new")
        assert (target / "old.txt").read_text() == "old"  # untouched until the block ends
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert target.stat().st_mode & 0o777 == 0o755


def test_an_error_while_filling_keeps_the_old_directory_and_removes_the_temp_one(tmp_path: Path):
    target = tmp_path / "nested" / "ckpt"
    with atomic_directory(target) as tmp:
        (tmp / "a.txt").write_text("a")
    with pytest.raises(RuntimeError, match="disk full"), atomic_directory(target) as tmp:
        (tmp / "b.txt").write_text("b")
        raise RuntimeError("disk full")
    assert sorted(p.name for p in target.iterdir()) == ["a.txt"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["ckpt"]
