from pathlib import Path

import pytest

from services.cache_dir import resolve_cache_dir
from services.errors import ConfigError, NotFoundError
from services.models.loading import resolve_device, torch_dtype
from services.models.registry import model_dir, resolve_model_dir


def test_cache_dir_prefers_the_setting_then_the_environment_then_home(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("TURNOPD_CACHE_DIR", str(tmp_path / "env"))
    assert resolve_cache_dir(tmp_path / "set") == tmp_path / "set"
    assert resolve_cache_dir() == tmp_path / "env"
    monkeypatch.delenv("TURNOPD_CACHE_DIR")
    assert resolve_cache_dir() == Path.home() / ".cache" / "turnopd"


def test_names_live_in_the_cache_and_paths_are_taken_as_given(tmp_path: Path):
    assert model_dir("teacher", tmp_path) == tmp_path / "models" / "teacher"
    assert model_dir("teacher-sft", tmp_path) == tmp_path / "models" / "teacher-sft"
    assert model_dir("/ckpt/Qwen3-8B", tmp_path) == Path("/ckpt/Qwen3-8B")
    assert model_dir("./local", tmp_path) == Path("./local")


def test_resolving_a_missing_model_says_how_to_build_it(tmp_path: Path):
    with pytest.raises(NotFoundError, match="turnopd models build"):
        resolve_model_dir("teacher", tmp_path)
    with pytest.raises(NotFoundError, match="no model checkpoint at /nowhere"):
        resolve_model_dir("/nowhere", tmp_path)


def test_a_directory_with_a_config_resolves(tmp_path: Path):
    (tmp_path / "models" / "mine").mkdir(parents=True)
    (tmp_path / "models" / "mine" / "config.json").write_text("{}")
    assert resolve_model_dir("mine", tmp_path) == tmp_path / "models" / "mine"


def test_dtypes_and_devices():
    import torch

    assert torch_dtype("bfloat16") == torch.bfloat16
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type in {"cpu", "cuda"}
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA"):
            resolve_device("cuda")
