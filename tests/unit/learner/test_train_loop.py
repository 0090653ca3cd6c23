"""The learner's resume: the newest checkpoint that loads, past damage the cheap check cannot see."""

import logging
from functools import partial

import torch
from tiny_models import tiny_qwen3

from services.learner.checkpoint import checkpoint_dir, newest_loadable, save_checkpoint
from services.learner.train_loop import _restored


def test_a_checkpoint_whose_rng_state_does_not_load_is_skipped_for_the_one_before(tmp_path, caplog):
    model = tiny_qwen3(seed=0, vocab=64, hidden=16, layers=1, tied=False)
    for step in (2, 4):
        with torch.no_grad():
            model.model.norm.weight.fill_(float(step))
        optimizer = {"state": {}, "param_groups": []}
        save_checkpoint(tmp_path, step, model, model.state_dict(), optimizer, "run", None)
    rng = checkpoint_dir(tmp_path, 4) / "rng.pt"
    rng.write_bytes(b"\0" * rng.stat().st_size)  # the recorded size, not a torch file
    with caplog.at_level(logging.WARNING, logger="services.learner.checkpoint"):
        found = newest_loadable(tmp_path, partial(_restored, device="cpu", dtype="float32"))
    assert found is not None
    path, restored = found
    assert path == checkpoint_dir(tmp_path, 2) and restored.step == 2
    assert torch.equal(restored.model.model.norm.weight, torch.full((16,), 2.0))
    assert restored.optimizer_state == {"state": {}, "param_groups": []}
    [skipped] = caplog.records
    assert (
        "step_000004" in skipped.getMessage()
        and "optimizer or RNG state does not load" in skipped.getMessage()
    )
