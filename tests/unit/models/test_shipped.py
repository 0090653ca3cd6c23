"""Shipped model artifacts: packaging, checksum verification, and name resolution falling back to them."""

import json
from pathlib import Path

import pytest
import torch

from services.contracts.rollout import EvalReport, TaskTypeScore
from services.errors import ConflictError, InputError, NotFoundError
from services.models import shipped as shipped_module
from services.models.registry import resolve_model_dir
from services.models.ship import record_measurement, ship_model
from services.models.shipped import (
    ARTIFACT_MANIFEST,
    IntegrityError,
    file_sha256,
    require_shipped,
    shipped_model,
    shipped_names,
)
from tests.tiny_models import build_tiny_qwen3


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = build_tiny_qwen3(tmp_path / "src", seed=3)
    (path / "turnopd_build.json").write_text(json.dumps({"task_reminder": True}))
    (path / "optimizer.pt").write_bytes(b"not shipped")
    return path


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "artifacts" / "models"
    monkeypatch.setattr(shipped_module, "SHIPPED_ROOT", root)
    return root


def _ship(source: Path, name: str = "tiny", **kwargs: object) -> Path:
    return ship_model(source, name, recipe=["turnopd teacher train --config X"], description="tiny", **kwargs)  # type: ignore[arg-type]


def test_a_shipped_model_stores_bf16_weights_and_lists_every_file_with_its_sha256(source: Path, root: Path):
    from safetensors.torch import load_file

    target = _ship(source)
    assert target == root / "tiny"
    manifest = json.loads((target / ARTIFACT_MANIFEST).read_text())
    assert manifest["recipe"] == ["turnopd teacher train --config X"]
    assert manifest["weights_dtype"] == "bfloat16"
    assert "optimizer.pt" not in manifest["files"]
    assert set(manifest["files"]) == {p.name for p in target.iterdir()} - {ARTIFACT_MANIFEST}
    for name, digest in manifest["files"].items():
        assert file_sha256(target / name) == digest
    original = load_file(source / "model.safetensors")
    stored = load_file(target / "model.safetensors")
    assert set(stored) == set(original)
    for key, tensor in stored.items():
        assert tensor.dtype == torch.bfloat16
        assert torch.equal(tensor, original[key].to(torch.bfloat16))
    # the source manifest (task_reminder, recipe settings) travels unchanged
    assert json.loads((target / "turnopd_build.json").read_text()) == {"task_reminder": True}


def test_shipping_over_an_existing_artifact_needs_replace_and_a_recipe_is_required(source: Path, root: Path):
    _ship(source)
    with pytest.raises(ConflictError, match="--replace"):
        _ship(source)
    _ship(source, replace=True)
    with pytest.raises(InputError, match="recipe"):
        ship_model(source, "other", recipe=[], description="x")


def test_a_changed_byte_is_refused_naming_the_file(source: Path, root: Path):
    target = _ship(source)
    assert require_shipped("tiny").path == target
    weights = target / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=r"checksum mismatch in .*tiny/model\.safetensors"):
        shipped_model("tiny")


def test_a_missing_or_unlisted_file_is_refused(source: Path, root: Path):
    target = _ship(source)
    (target / "stray.bin").write_bytes(b"x")
    with pytest.raises(IntegrityError, match=r"does not list.*stray\.bin"):
        shipped_model("tiny")
    (target / "stray.bin").unlink()
    (target / "tokenizer_config.json").unlink(missing_ok=True)
    (target / "config.json").unlink()
    with pytest.raises(IntegrityError, match=r"shipped file missing: .*config\.json"):
        shipped_model("tiny")


def test_names_resolve_to_the_cache_first_then_to_a_shipped_model(source: Path, root: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    _ship(source)
    assert shipped_names() == ["tiny"]
    assert resolve_model_dir("tiny", cache) == root / "tiny"
    own = cache / "models" / "tiny"
    own.mkdir(parents=True)
    (own / "config.json").write_text("{}")
    assert resolve_model_dir("tiny", cache) == own
    with pytest.raises(NotFoundError, match=r"none shipped under that name \(shipped: tiny\)"):
        resolve_model_dir("absent", cache)


def test_a_shipped_model_loads_as_a_float32_causal_lm(source: Path, root: Path, tmp_path: Path):
    from services.models.loading import load_causal_lm

    _ship(source)
    model = load_causal_lm("tiny", dtype="float32", cache_dir=tmp_path / "cache")
    assert next(model.parameters()).dtype == torch.float32
    logits = model(torch.tensor([[1, 2, 3]])).logits
    assert logits.shape == (1, 3, 64)
    assert torch.isfinite(logits).all()


def test_a_measurement_is_recorded_from_an_eval_report(source: Path, root: Path):
    target = _ship(source)
    score = TaskTypeScore(
        tasks=60,
        episodes=60,
        successes=45,
        failed_episodes=0,
        success_rate=0.75,
        avg_at_n=0.75,
        pass_at_n=0.75,
        mean_turns=12.0,
        mean_reward=0.75,
    )
    report = EvalReport(
        model=str(target),
        env="alfworld",
        split="valid_unseen",
        n=1,
        temperature=0.0,
        max_turns=50,
        seed=0,
        weights_version=0,
        success_rate=0.75,
        avg_at_n=0.75,
        pass_at_n=0.75,
        mean_reward=0.75,
        episodes=60,
        failed_episodes=0,
        truncated_episodes=0,
        per_task_type={"pick_and_place": score},
        overall=score,
        generated_tokens=1,
        wall_s=1.0,
    )
    record_measurement(target, report, "turnopd eval --model X")
    measured = require_shipped("tiny").measured
    assert measured is not None
    assert measured["success_rate"] == 0.75
    assert measured["games"] == 60
    assert measured["command"] == "turnopd eval --model X"
    assert measured["per_task_type"] == {"pick_and_place": 0.75}
