import itertools
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.models_cmd import app
from services.errors import NotFoundError
from services.models import build as build_module
from services.models.corpus import alfworld_corpus


@pytest.fixture
def small_corpus(monkeypatch):
    """Keep the CLI test fast: the default corpus, truncated."""
    monkeypatch.setattr(build_module, "zoo_corpus", lambda seed: itertools.islice(alfworld_corpus(seed), 200))


def test_build_then_path(tmp_path: Path, small_corpus):
    runner = CliRunner()
    result = runner.invoke(app, ["build", "--cache-dir", str(tmp_path), "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "teacher    built" in result.output and "student    built" in result.output
    assert (tmp_path / "models/teacher/model.safetensors").is_file()

    again = runner.invoke(app, ["build", "--cache-dir", str(tmp_path), "--seed", "3"])
    assert again.exit_code == 0 and "teacher    cached" in again.output

    path = runner.invoke(app, ["path", "student", "--cache-dir", str(tmp_path)])
    assert path.exit_code == 0
    assert path.output.strip() == str(tmp_path / "models" / "student")


def test_path_of_an_unbuilt_model_is_a_not_found_error(tmp_path: Path):
    result = CliRunner().invoke(app, ["path", "teacher", "--cache-dir", str(tmp_path)])
    assert result.exit_code != 0
    assert isinstance(result.exception, NotFoundError)


def test_cache_dir_comes_from_the_settings_file(tmp_path: Path, small_corpus):
    config = tmp_path / "cfg.toml"
    config.write_text(f'[models]\ncache_dir = "{tmp_path / "c"}"\nseed = 4\n')
    result = CliRunner().invoke(app, ["build", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert '"seed": 4' in (tmp_path / "c/models/student/turnopd_build.json").read_text()
