"""What `teacher train` refuses before collecting anything."""

from pathlib import Path

import pytest

from services.errors import ConfigError
from services.settings.loader import load_recipe
from services.teacher_training.pipeline import check_request


def test_base_layers_beyond_the_base_model_fail_before_any_work(zoo_cache: Path, tmp_path: Path) -> None:
    overrides = {
        "models": {"cache_dir": str(zoo_cache)},
        "sft": {"base": "teacher", "out": str(tmp_path / "o")},
    }
    fits = load_recipe(None, {**overrides, "sft": {**overrides["sft"], "base_layers": [0, 3]}})
    assert check_request(fits) == tmp_path / "o"
    too_deep = load_recipe(None, {**overrides, "sft": {**overrides["sft"], "base_layers": [0, 4]}})
    with pytest.raises(ConfigError, match=r"base model has 4 layers"):
        check_request(too_deep)
