"""A perturbed model: every matrix moved by seeded noise of the asked spread, the rest untouched, the
same bytes for the same seed, and the shipped students exactly what their recipes build."""

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from services.cli.models_cmd import app
from services.errors import ConflictError, InputError
from services.models.loading import load_causal_lm
from services.models.perturb import perturb_model, perturb_weights
from services.models.shipped import require_shipped


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def test_every_matrix_moves_by_the_asked_spread_and_vectors_stay(zoo_cache: Path) -> None:
    model = load_causal_lm("teacher", cache_dir=zoo_cache)
    before = _weights(model)
    matrices = perturb_weights(model, 0.25, seed=7)
    after = _weights(model)
    assert matrices == sum(1 for w in before.values() if w.dim() >= 2) and matrices > 10
    for name, w in before.items():
        if w.dim() < 2:
            assert torch.equal(after[name], w), name  # norm weights are not perturbed
            continue
        moved = (after[name] - w).std().item() / w.std().item()
        assert moved == pytest.approx(0.25, rel=0.1), name  # noise of 0.25 of the matrix's spread


def test_the_seed_alone_decides_the_noise(zoo_cache: Path) -> None:
    runs = []
    for seed in (3, 3, 4):
        model = load_causal_lm("teacher", cache_dir=zoo_cache)
        perturb_weights(model, 0.1, seed)
        runs.append(_weights(model))
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
    assert not torch.equal(runs[0]["model.embed_tokens.weight"], runs[2]["model.embed_tokens.weight"])


def test_only_moves_the_matrices_it_names_with_the_noise_drawn_for_them_alone(zoo_cache: Path) -> None:
    model = load_causal_lm("teacher", cache_dir=zoo_cache)
    before = _weights(model)
    matrices = perturb_weights(model, 0.5, seed=1, only="self_attn")
    after = _weights(model)
    named = [name for name, w in before.items() if w.dim() >= 2 and "self_attn" in name]
    assert matrices == len(named) and matrices == 4 * len(model.model.layers)  # q, k, v, o per layer
    for name, w in before.items():
        if name in named:
            moved = (after[name] - w).std().item() / w.std().item()
            assert moved == pytest.approx(0.5, rel=0.1), name
        else:
            assert torch.equal(after[name], w), name  # MLPs, embeddings and norms kept
    again = load_causal_lm("teacher", cache_dir=zoo_cache)
    perturb_weights(again, 0.5, seed=1, only="self_attn")
    assert all(torch.equal(after[k], w) for k, w in _weights(again).items())
    with pytest.raises(
        InputError, match=r"no weight matrix has 'atn' in its name; the matrices are named .*q_proj"
    ):
        perturb_weights(load_causal_lm("teacher", cache_dir=zoo_cache), 0.5, seed=1, only="atn")


@pytest.mark.parametrize("scale", [0.0, -0.1, math.nan, math.inf, 11.0])
def test_a_bad_scale_is_named(zoo_cache: Path, scale: float) -> None:
    model = load_causal_lm("teacher", cache_dir=zoo_cache)
    with pytest.raises(InputError, match="noise scale"):
        perturb_weights(model, scale, 0)


def test_the_cli_saves_a_checkpoint_with_its_manifest_and_keeps_an_existing_one(
    zoo_cache: Path, tmp_path: Path
) -> None:
    out = tmp_path / "noisy"
    args = ["perturb", "teacher", "--out", str(out), "--scale", "0.5", "--seed", "2"]
    result = CliRunner().invoke(app, [*args, "--cache-dir", str(zoo_cache)])
    assert result.exit_code == 0, result.output
    assert "perturbed (scale 0.5, seed 2)" in result.output
    manifest = json.loads((out / "turnopd_build.json").read_text())
    assert manifest["stage"] == "perturb" and manifest["base"] == "teacher"
    assert manifest["perturb"] == {
        "scale": 0.5,
        "seed": 2,
        "matrices": manifest["perturb"]["matrices"],
        "dtype": "bfloat16",
    }
    assert manifest["base_manifest"]["name"] == "teacher"
    saved = load_file(out / "model.safetensors")
    assert all(t.dtype == torch.bfloat16 for t in saved.values())
    base = load_causal_lm("teacher", cache_dir=zoo_cache)
    assert not torch.equal(saved["model.embed_tokens.weight"].float(), base.model.embed_tokens.weight)
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    with pytest.raises(ConflictError, match="--replace"):
        perturb_model("teacher", str(out), 0.5, 2, cache_dir=zoo_cache)
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp  # nothing overwritten


@pytest.mark.parametrize(
    ("name", "base", "scale", "only", "reminder"),
    [
        ("student-novel-noisy", "teacher-novel", 0.25, None, True),
        ("student-search-noisy", "teacher-search-wide", 0.85, "self_attn", False),
        ("student-webshop-noisy", "teacher-webshop-wide", 0.75, "self_attn", False),
    ],
)
def test_a_shipped_perturbed_student_is_exactly_what_its_recipe_builds(
    name: str, base: str, scale: float, only: str | None, reminder: bool, tmp_path: Path
) -> None:
    student = require_shipped(name)
    teacher = require_shipped(base)
    command = student.manifest["recipe"][-1]
    narrowed = "" if only is None else f" --only {only}"
    assert command == f"turnopd models perturb {base} --out {name} --scale {scale:g} --seed 0{narrowed}"
    built = perturb_model(str(teacher.path), str(tmp_path / "rebuilt"), scale, 0, only=only)
    shipped, rebuilt = load_file(student.path / "model.safetensors"), load_file(built / "model.safetensors")
    assert sorted(shipped) == sorted(rebuilt)
    assert all(torch.equal(shipped[k], rebuilt[k]) for k in shipped)
    manifest = json.loads((student.path / "turnopd_build.json").read_text())
    assert manifest.get("task_reminder", False) is reminder  # plays in its teacher's observation format
