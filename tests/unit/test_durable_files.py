"""Durable writes: every file and directory entry they change is synced before they return."""

import os
import stat
from pathlib import Path

from services.durable_files import fsync_tree, replace_text


def test_fsync_tree_syncs_files_then_directories_deepest_first(tmp_path: Path, synced: list[str]):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "sub" / "b.txt").write_text("b")
    fsync_tree(tmp_path)
    root = str(tmp_path)
    assert synced == [f"{root}/a.txt", f"{root}/sub/b.txt", f"{root}/sub", root]


def test_replace_text_gives_a_new_file_the_usual_mode_and_keeps_an_old_file_s_name(tmp_path: Path):
    target = tmp_path / "config.json"
    replace_text(target, "one")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    replace_text(target, "two")
    assert target.read_text() == "two" and [p.name for p in tmp_path.iterdir()] == ["config.json"]
