"""Published weights: the fit check both rollout engines run, and the file that carries them to vLLM."""

from pathlib import Path

import pytest
import torch

from services.errors import ConfigError, InputError
from services.rollout_worker.engines.weights_file import (
    check_weights_fit,
    checkpoint_shapes,
    read_weights,
    shapes_of,
    staging_dir,
    write_weights,
)

EXPECTED = {"model.embed_tokens.weight": (8, 4), "model.norm.weight": (4,), "lm_head.weight": (8, 4)}


def test_weights_that_replace_every_tensor_fit():
    check_weights_fit(dict(EXPECTED), EXPECTED)
    # a tied head may be missing on either side
    check_weights_fit(
        {k: v for k, v in EXPECTED.items() if k != "lm_head.weight"}, EXPECTED, {"lm_head.weight"}
    )


def test_missing_extra_and_reshaped_weights_are_named():
    offered = {"model.embed_tokens.weight": (8, 5), "model.extra.weight": (1,)}
    with pytest.raises(InputError) as caught:
        check_weights_fit(offered, EXPECTED)
    message = str(caught.value)
    assert "nothing was loaded" in message
    assert "2 missing ['lm_head.weight', 'model.norm.weight']" in message
    assert "1 unexpected ['model.extra.weight']" in message
    assert "model.embed_tokens.weight [8, 5] != [8, 4]" in message


def test_a_file_round_trip_keeps_names_and_values_and_casts_floats(tmp_path: Path):
    torch.manual_seed(0)
    state = {"a.weight": torch.randn(3, 2), "b.index": torch.arange(4), "c.bias": torch.randn(5)}
    update = write_weights(state, tmp_path, version=7, dtype=torch.bfloat16)
    assert update.version == 7
    assert Path(update.path).is_file() and Path(update.path).is_absolute()
    assert Path(update.path).name.startswith("turnopd-weights-v7-") and update.path.endswith(".safetensors")
    assert [p.name for p in tmp_path.iterdir()] == [Path(update.path).name]  # no partial file left
    back = dict(read_weights(update.path))
    assert list(back) == sorted(state)
    assert back["a.weight"].dtype == torch.bfloat16 and back["b.index"].dtype == torch.int64
    assert torch.equal(back["a.weight"], state["a.weight"].to(torch.bfloat16))
    assert torch.equal(back["b.index"], state["b.index"])
    assert checkpoint_shapes(tmp_path) == {"a.weight": (3, 2), "b.index": (4,), "c.bias": (5,)}
    assert shapes_of(state) == checkpoint_shapes(tmp_path)


def test_checkpoint_shapes_need_safetensors_files(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"no \*\.safetensors"):
        checkpoint_shapes(tmp_path)


def test_staging_prefers_the_candidates_then_the_temp_directory(tmp_path: Path):
    assert staging_dir(1, [tmp_path]) == tmp_path
    missing = tmp_path / "absent"
    assert staging_dir(1, [missing]) not in (missing, tmp_path)  # the temp directory
    with pytest.raises(ConfigError, match=r"no room for .* GiB of weights"):
        staging_dir(1 << 60, [tmp_path])
