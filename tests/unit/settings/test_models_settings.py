from pathlib import Path

import pytest

from services.errors import ConfigError
from services.settings import TurnOPDSettings, load_settings


def test_defaults_use_the_zoo_and_the_transformers_engine():
    models = TurnOPDSettings().models
    assert (models.student, models.teacher, models.engine) == ("student", "teacher", "transformers")
    assert (models.device, models.dtype, models.cache_dir) == ("cpu", "float32", None)


def test_environment_overrides(monkeypatch):
    monkeypatch.setenv("TURNOPD_MODELS__ENGINE", "vllm")
    monkeypatch.setenv("TURNOPD_MODELS__TEACHER", "/ckpt/Qwen3-8B")
    models = load_settings().models
    assert (models.engine, models.teacher) == ("vllm", "/ckpt/Qwen3-8B")


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[models]\nengine = "sglang"\n', "models.engine"),
        ("[models]\nvllm_gpu_memory_utilization = 1.5\n", "models.vllm_gpu_memory_utilization"),
        ('[models]\nstudent = ""\n', "models.student"),
        ("[models]\nunknown = 1\n", "models.unknown"),
    ],
)
def test_invalid_values_name_their_key(tmp_path: Path, text: str, key: str):
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=key):
        load_settings(path)
