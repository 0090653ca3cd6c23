"""A starting student built by perturbing another model's weights: as large as its source, weak
because its weights are off rather than because it lacks capacity.

Every weight matrix ``W`` (every parameter of two or more dimensions: embeddings, projections, the
output head) becomes ``W + scale * std(W) * N(0, 1)``, the noise drawn from one seeded CPU
generator in the model's parameter order, so a name, scale and seed give the same weights on every
machine. Norm weights and biases (one dimension) are left as they are. ``only`` narrows it to the
matrices whose parameter name contains that text (``self_attn``: the attention projections, the
MLPs and embeddings kept), the noise drawn for those alone. The demo's student,
``student-novel-noisy``, is ``teacher-novel`` at scale 0.25, seed 0 (docs/teachers.md has why: a
cut student as far from the teacher falls under OPD, this one climbs); search's,
``student-search-noisy``, is ``teacher-search-wide`` with its attention at scale 0.85 (from noise on
every matrix OPD climbed to only 55% of the teacher; docs/results/2026-12-02-search-teacher.md).
"""

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.errors import ConflictError, InputError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

PERTURB_FORMAT = 1
# The dtype the perturbed weights are saved in: the shipped artifacts' dtype, so the recipe's output
# and the shipped student are the same bytes.
SAVED_DTYPE = "bfloat16"


def check_scale(scale: float) -> float:
    """``scale`` if it is a usable noise scale, else an InputError naming it."""
    if not math.isfinite(scale) or scale <= 0.0 or scale > 10.0:
        raise InputError(
            f"the noise scale must be above 0 and at most 10 (of each matrix's std), not {scale}"
        )
    return scale


def perturb_weights(model: "PreTrainedModel", scale: float, seed: int, only: str | None = None) -> int:
    """Add ``scale * std(W) * N(0, 1)`` to every matrix ``W`` of ``model`` (whose name contains
    ``only``, if given), in place; returns how many matrices were perturbed. Tied parameters (an
    output head sharing the embedding) count once."""
    import torch

    check_scale(scale)
    generator = torch.Generator().manual_seed(seed)
    perturbed = 0
    with torch.no_grad():
        for name, parameter in model.named_parameters():  # deduplicated: a tied weight is listed once
            if parameter.dim() < 2 or (only is not None and only not in name):
                continue
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float32)
            spread = parameter.detach().float().std()
            parameter.add_((scale * spread * noise).to(parameter.dtype))
            perturbed += 1
    if perturbed == 0:
        names = sorted({name.split(".")[-2] for name, p in model.named_parameters() if p.dim() >= 2})
        raise InputError(
            f"no weight matrix has {only!r} in its name; the matrices are named {', '.join(names)}"
        )
    return perturbed


def perturbation_manifest(
    name: str,
    base: str,
    base_manifest: dict[str, Any] | None,
    scale: float,
    seed: int,
    matrices: int,
    only: str | None = None,
) -> dict[str, Any]:
    """The ``turnopd_build.json`` of a perturbed model: what it came from and how; the observation
    format its base was trained in carries over (``task_reminder``)."""
    manifest: dict[str, Any] = {
        "format": PERTURB_FORMAT,
        "kind": "model",
        "stage": "perturb",
        "name": name,
        "base": base,
        "base_manifest": base_manifest,
        "perturb": {"scale": scale, "seed": seed, "matrices": matrices, "dtype": SAVED_DTYPE},
    }
    if only is not None:
        manifest["perturb"]["only"] = only
    if base_manifest is not None and "task_reminder" in base_manifest:
        manifest["task_reminder"] = base_manifest["task_reminder"]
    return manifest


def perturb_model(
    base: str,
    out: str,
    scale: float,
    seed: int,
    cache_dir: Path | None = None,
    replace: bool = False,
    only: str | None = None,
) -> Path:
    """Load ``base`` (a name or path) in float32, perturb it (the matrices named with ``only``, if
    given), and save it in bf16 as ``out`` with its tokenizer and manifest; returns the checkpoint
    directory. An existing ``out`` is kept unless ``replace``."""
    import torch

    from services.models.build import read_manifest
    from services.models.loading import load_causal_lm, load_tokenizer
    from services.models.registry import resolve_model_dir
    from services.models.saved_checkpoint import checkpoint_target, save_checkpoint

    check_scale(scale)
    if seed < 0:
        raise InputError(f"the noise seed must be >= 0, not {seed}")
    target = checkpoint_target(out, cache_dir)
    if target.exists() and not replace:
        raise ConflictError(f"{target} already exists; pass --replace to overwrite it")
    base_dir = resolve_model_dir(base, cache_dir)
    model = load_causal_lm(str(base_dir), dtype="float32")
    matrices = perturb_weights(model, scale, seed, only)
    model = model.to(torch.bfloat16)  # type: ignore[arg-type]  # transformers wraps `to`; mypy misreads it
    manifest = perturbation_manifest(out, base, read_manifest(base_dir), scale, seed, matrices, only)
    return save_checkpoint(model, load_tokenizer(str(base_dir)), target, manifest)
