"""Learner checkpoints on disk without a model to save: the files a resume reads, real and loadable."""

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from services.learner.checkpoint import STATE_FILE, checkpoint_dir


def write_checkpoint(run_dir: Path, step: int, record_sizes: bool = True) -> Path:
    """A checkpoint of ``step`` whose weights are one tensor filled with ``step``; ``record_sizes``
    False: the state of a checkpoint saved before sizes were recorded."""
    path = checkpoint_dir(run_dir, step)
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "qwen3"}')
    save_file({"w": torch.full((4,), float(step))}, str(path / "model.safetensors"))
    torch.save({"state": {}, "param_groups": []}, path / "optimizer.pt")
    torch.save({"torch": torch.get_rng_state()}, path / "rng.pt")
    state: dict[str, object] = {"step": step, "run_id": "run"}
    if record_sizes:
        state["files"] = {p.name: p.stat().st_size for p in sorted(path.iterdir())}
    (path / STATE_FILE).write_text(json.dumps(state))
    return path


def write_metrics(run_dir: Path, steps: range) -> None:
    """A metrics.jsonl of ``steps`` (step and cumulative time only: what a resume reads)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = (json.dumps({"step": k, "cumulative_s": 10.0 * k}) for k in steps)
    (run_dir / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
