"""A starting student that is the teacher with its weights perturbed (the fourth sitting of
docs/results/2026-11-27-starting-students.md): every matrix W of `teacher-novel` becomes
W + scale * std(W) * N(0, 1) (seed 0), saved in bf16 as a model directory beside the teacher's
tokenizer files.

    python docs/results/2026-11-27-starting-students/perturb_teacher.py 0.25 models/noise0.25
"""

import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from services.models.registry import resolve_model_dir


def main(scale: float, out: Path, seed: int = 0) -> None:
    src = resolve_model_dir("teacher-novel")  # the cached copy, else the shipped one, verified
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out, ignore=shutil.ignore_patterns("model.safetensors", "turnopd_*"))
    model = AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() >= 2:
                noise = torch.randn(parameter.shape, generator=generator)
                parameter.add_(scale * parameter.std() * noise)
    model.to(torch.bfloat16).save_pretrained(out)


if __name__ == "__main__":
    main(float(sys.argv[1]), Path(sys.argv[2]))
