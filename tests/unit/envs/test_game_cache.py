"""The game cache builds a file once, atomically, and reuses it."""

from pathlib import Path

import pytest

from services.envs.game_cache import atomic_write_text, ensure_file


def test_ensure_file_builds_once(tmp_path):
    calls = []

    def build(target: Path) -> None:
        calls.append(target)
        atomic_write_text(target, "game")

    path = tmp_path / "a" / "game.json"
    assert ensure_file(path, build) == (path, True)
    assert ensure_file(path, build) == (path, False)
    assert path.read_text() == "game" and calls == [path]


def test_builder_that_creates_nothing_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="did not create"):
        ensure_file(tmp_path / "x.json", lambda target: None)


def test_failed_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "g.json"
    with pytest.raises(TypeError):
        atomic_write_text(target, 123)  # type: ignore[arg-type]
    assert not target.exists() and list(tmp_path.iterdir()) == []
