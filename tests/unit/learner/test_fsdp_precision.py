"""FSDP2 on CPU (gloo): float32 master weights with bfloat16 compute, and the chunked loss under it."""

import os
import socket

import pytest
import tiny_models
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.tensor import DTensor
from transformers import Qwen3ForCausalLM

from services.learner.fsdp import apply_fsdp, master_dtype, mixed_precision
from services.learner.objective import MicroBatch, full_logits_loss, micro_batch_loss

VOCAB = 64


def tiny_qwen3(tied: bool = True, seed: int = 0) -> Qwen3ForCausalLM:
    model: Qwen3ForCausalLM = tiny_models.tiny_qwen3(seed, vocab=VOCAB, tied=tied)
    return model


def micro_batch(seed: int) -> MicroBatch:
    """Two padded rows, five supervised positions, teacher top-4 from a random distribution."""
    gen = torch.Generator().manual_seed(seed)
    ids_B_T = torch.randint(0, VOCAB, (2, 12), generator=gen)
    ids_B_T[1, 9:] = 0  # the second row is right-padded
    row_N, pos_N = torch.tensor([0, 0, 0, 1, 1]), torch.tensor([4, 5, 6, 3, 7])
    teacher_N_V = torch.log_softmax(3 * torch.randn(5, VOCAB, generator=gen), -1)
    top_N_K = teacher_N_V.topk(4, dim=-1)
    return MicroBatch(
        input_ids_B_T=ids_B_T,
        row_N=row_N,
        logit_pos_N=pos_N - 1,
        target_N=ids_B_T[row_N, pos_N],
        top_ids_N_K=top_N_K.indices,
        top_logprobs_N_K=top_N_K.values,
        weights_N=torch.full((5,), 0.2),
        sampler_logprobs_N=torch.full((5,), -4.0),
        counts=[3, 2],
    )


def sharded_copy(reference: Qwen3ForCausalLM, compute_dtype) -> Qwen3ForCausalLM:
    model = tiny_qwen3(reference.config.tie_word_embeddings)
    model.load_state_dict(reference.state_dict())
    return apply_fsdp(model, compute_dtype)


def full_grads(model) -> dict[str, torch.Tensor]:
    return {
        n: p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        for n, p in model.named_parameters()
    }


@pytest.fixture
def gloo_world_of_one():
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_precision_choices():
    assert master_dtype("bfloat16") == "float32" and master_dtype("float32") == "float32"
    policy = mixed_precision("bfloat16")
    assert (policy.param_dtype, policy.reduce_dtype) == (torch.bfloat16, torch.float32)
    assert mixed_precision("float32").param_dtype is None
    with pytest.raises(ValueError, match="unknown compute dtype"):
        mixed_precision("float16")  # type: ignore[arg-type]


def test_apply_fsdp_refuses_bfloat16_parameters(gloo_world_of_one):
    with pytest.raises(ValueError, match=r"float32 master parameters, got torch\.bfloat16"):
        apply_fsdp(tiny_qwen3().to(torch.bfloat16), "bfloat16")


@pytest.mark.parametrize("tied", [True, False])
def test_chunked_loss_under_fsdp_equals_the_unsharded_full_logits_path(gloo_world_of_one, tied):
    reference = tiny_qwen3(tied)
    model = sharded_copy(reference, "float32")
    mb = micro_batch(1)
    loss, kl = micro_batch_loss(model, mb, "tail", (0.2, 0.2), chunk_tokens=2)
    loss.backward()
    ref_loss, ref_kl = full_logits_loss(reference, mb, "tail", (0.2, 0.2))
    ref_loss.backward()
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-8)
    torch.testing.assert_close(kl, ref_kl, rtol=1e-5, atol=1e-7)
    ref_grads = full_grads(reference)
    for name, grad in full_grads(model).items():
        torch.testing.assert_close(grad, ref_grads[name], rtol=1e-4, atol=1e-7, msg=name)


def test_bfloat16_compute_keeps_float32_master_weights(gloo_world_of_one):
    reference = tiny_qwen3()
    model = sharded_copy(reference, "bfloat16")
    seen: list[torch.dtype] = []
    model.model.layers[0].mlp.down_proj.register_forward_hook(lambda m, a, out: seen.append(out.dtype))
    mb = micro_batch(2)
    loss, _ = micro_batch_loss(model, mb, "tail", (0.2, 0.2), chunk_tokens=2)
    loss.backward()
    assert seen == [torch.bfloat16]  # the layer computed in bf16 ...
    ref_loss, _ = full_logits_loss(reference, mb, "tail", (0.2, 0.2))
    assert loss.item() == pytest.approx(ref_loss.item(), rel=2e-2) and loss.item() != ref_loss.item()
    before = {n: p.full_tensor().clone() for n, p in model.named_parameters()}
    torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.0).step()
    for name, param in model.named_parameters():  # ... while parameters and gradients stay float32
        assert param.to_local().dtype == torch.float32 and param.grad.to_local().dtype == torch.float32
        after = param.full_tensor().detach()
        step = (after - before[name]).abs()
        moved = step[step > 0]  # AdamW's first step moves each weight with a gradient by about lr
        assert moved.numel() > 0.5 * step.numel(), name
        assert moved.max().item() < 2e-6 and moved.median().item() > 5e-7, name
        # far below bf16's resolution at these magnitudes: bf16 parameters would not have moved
        unchanged_in_bf16 = after.to(torch.bfloat16) == before[name].to(torch.bfloat16)
        assert unchanged_in_bf16.float().mean().item() > 0.9, name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(rank: int, world: int, port: int, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    try:
        reference = tiny_qwen3(tied=True)
        model = sharded_copy(reference, "bfloat16")
        loss, _ = micro_batch_loss(model, micro_batch(10 + rank), "tail", (0.2, 0.2), chunk_tokens=3)
        loss.backward()
        grads = full_grads(model)
        optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
        optim.step()
        dtypes = {str(p.to_local().dtype) for p in model.parameters()}
        results.put((rank, loss.item(), {n: g.float().numpy() for n, g in grads.items()}, dtypes))
    finally:
        dist.destroy_process_group()


@pytest.mark.integration
def test_two_gloo_ranks_average_bfloat16_gradients_into_float32_shards():
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    ranks = mp.start_processes(_rank, args=(2, _free_port(), results), nprocs=2, join=False)
    by_rank = {r: rest for r, *rest in (results.get(timeout=120) for _ in range(2))}
    while not ranks.join():
        pass
    reference = tiny_qwen3(tied=True)
    losses = []
    for rank in (0, 1):
        loss, _ = full_logits_loss(reference, micro_batch(10 + rank), "tail", (0.2, 0.2))
        (loss / 2).backward()  # FSDP averages the ranks' gradients
        losses.append(loss.item())
    ref_grads = full_grads(reference)
    for rank, (loss, grads, dtypes) in by_rank.items():
        assert loss == pytest.approx(losses[rank], rel=2e-2)
        assert dtypes == {"torch.float32"}
        for name, grad in grads.items():
            scale = ref_grads[name].abs().max().item()
            torch.testing.assert_close(
                torch.from_numpy(grad), ref_grads[name], rtol=0.1, atol=0.05 * scale, msg=name
            )
