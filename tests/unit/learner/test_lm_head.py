"""The chunked, fused LM head: loss, per-token KL and every gradient equal the full-logits path."""

import pytest
import torch
from learner_batches import make_batch
from tiny_models import tiny_qwen3
from transformers import AutoModelForCausalLM, Qwen3ForCausalLM

from services.errors import ConfigError
from services.learner.lm_head import chunked_head_kl
from services.learner.objective import MicroBatch, collate, full_logits_loss, head_weight, micro_batch_loss
from services.models.zoo import qwen3_config, zoo_spec

CPU = torch.device("cpu")


def untied_qwen3(vocab: int = 64, seed: int = 3) -> Qwen3ForCausalLM:
    model: Qwen3ForCausalLM = tiny_qwen3(seed, vocab=vocab, tied=False)
    return model


def zoo_student_shape() -> Qwen3ForCausalLM:
    """The zoo student's shape (hidden 128, 2 layers, 8,192-id vocabulary, tied), random weights."""
    torch.manual_seed(4)
    return Qwen3ForCausalLM(
        qwen3_config(zoo_spec("student"), vocab_size=8192, pad_token_id=0, eos_token_id=1)
    )


def own_logprobs(model, mb: MicroBatch) -> torch.Tensor:
    """The model's log-prob of each supervised token (what a sampler with its weights records)."""
    with torch.no_grad():
        logits = model(input_ids=mb.input_ids_B_T).logits
    lp_N_V = torch.log_softmax(logits[mb.row_N, mb.logit_pos_N], -1)
    return lp_N_V.gather(-1, mb.target_N[:, None])[:, 0]


def near_sampler(model, mb: MicroBatch, spread: float = 0.5) -> MicroBatch:
    """The micro-batch with sampler log-probs within ``spread`` nats of the model's own, so that a
    (0.2, 0.2) clip leaves some ratios inside and cuts others."""
    own_N = own_logprobs(model, mb)
    noise_N = (torch.rand(own_N.shape, generator=torch.Generator().manual_seed(5)) * 2 - 1) * spread
    return MicroBatch(**{**mb.__dict__, "sampler_logprobs_N": own_N + noise_N})


def loss_and_grads(loss_fn, model, mb, clip, **kwargs):
    model.zero_grad(set_to_none=True)
    loss, kl = loss_fn(model, mb, "tail", clip, **kwargs)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    return loss.detach(), kl, grads


def assert_same(new, reference):
    (loss, kl, grads), (ref_loss, ref_kl, ref_grads) = new, reference
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(kl, ref_kl, rtol=1e-5, atol=1e-6)
    assert grads.keys() == ref_grads.keys()
    for name, grad in grads.items():
        scale = ref_grads[name].abs().max().item()
        assert scale > 0, name  # every parameter gets a gradient, the head included
        torch.testing.assert_close(grad, ref_grads[name], rtol=1e-4, atol=1e-5 * scale, msg=name)


@pytest.fixture(scope="module")
def batch(tiny_teacher):
    return make_batch(tiny_teacher, step=7)


@pytest.mark.parametrize("head", ["tied", "untied"])
def test_chunked_loss_and_gradients_equal_the_full_logits_path(head, tiny_student, batch):
    model = AutoModelForCausalLM.from_pretrained(tiny_student) if head == "tied" else untied_qwen3()
    assert model.config.tie_word_embeddings == (head == "tied")
    mb = collate(batch.samples, pad_id=0, device=CPU)
    n = mb.row_N.numel()
    lengths = {len(s.token_ids) for s in batch.samples}
    assert len(lengths) > 1 and n % 6 != 0  # padded rows; 6 does not divide the positions
    reference = loss_and_grads(full_logits_loss, model, mb, (0.9, 9.0))
    assert reference[0].item() > 1e-4
    for chunk in (1, 6, n + 5):
        assert_same(loss_and_grads(micro_batch_loss, model, mb, (0.9, 9.0), chunk_tokens=chunk), reference)
    no_recompute = loss_and_grads(micro_batch_loss, model, mb, (0.9, 9.0), chunk_tokens=6, recompute=False)
    assert_same(no_recompute, reference)


def test_clipped_importance_ratio_is_unchanged(tiny_student, batch):
    model = AutoModelForCausalLM.from_pretrained(tiny_student)
    mb = near_sampler(model, collate(batch.samples, pad_id=0, device=CPU))
    clip = (0.2, 0.2)
    reference = loss_and_grads(full_logits_loss, model, mb, clip)
    new = loss_and_grads(micro_batch_loss, model, mb, clip, chunk_tokens=5)
    assert_same(new, reference)
    # the clip matters here: some ratios are cut on each side, others are left alone
    ratio_N = torch.exp(own_logprobs(model, mb) - mb.sampler_logprobs_N)
    assert (ratio_N > 1.2).any() and (ratio_N < 0.8).any() and ((ratio_N > 0.8) & (ratio_N < 1.2)).any()
    clipped_N = ratio_N.clamp(0.8, 1.2)
    torch.testing.assert_close(new[0], (mb.weights_N * clipped_N * new[1]).sum(), rtol=1e-5, atol=1e-8)
    assert new[0].item() != pytest.approx((mb.weights_N * new[1]).sum().item(), rel=1e-3)


def test_zoo_student_shape_equal_to_the_full_logits_path(batch):
    model = zoo_student_shape()
    mb = collate(batch.samples, pad_id=0, device=CPU)
    reference = loss_and_grads(full_logits_loss, model, mb, (0.9, 9.0))
    assert_same(loss_and_grads(micro_batch_loss, model, mb, (0.9, 9.0), chunk_tokens=16), reference)


def test_a_micro_batch_without_supervised_positions_still_backpropagates(tiny_student, batch):
    model = AutoModelForCausalLM.from_pretrained(tiny_student)
    mb = collate(batch.samples[:1], pad_id=0, device=CPU)
    empty = MicroBatch(
        **{
            **mb.__dict__,
            "row_N": mb.row_N[:0],
            "logit_pos_N": mb.logit_pos_N[:0],
            "target_N": mb.target_N[:0],
            "top_ids_N_K": mb.top_ids_N_K[:0],
            "top_logprobs_N_K": mb.top_logprobs_N_K[:0],
            "weights_N": mb.weights_N[:0],
            "sampler_logprobs_N": mb.sampler_logprobs_N[:0],
            "counts": [0],
        }
    )
    loss, kl = micro_batch_loss(model, empty, "tail", (0.9, 9.0))
    loss.backward()
    assert loss.item() == 0.0 and kl.shape == (0,)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())


def test_chunked_head_kl_refuses_a_chunk_of_zero():
    hidden, weight = torch.zeros(3, 4), torch.zeros(5, 4)
    ids, lps, target = (
        torch.zeros(3, 2, dtype=torch.long),
        torch.full((3, 2), -1.0),
        torch.zeros(3, dtype=torch.long),
    )
    with pytest.raises(ValueError, match="chunk_tokens must be >= 1"):
        chunked_head_kl(hidden, weight, ids, lps, target, "tail", chunk_tokens=0)


def test_head_weight_refuses_heads_it_would_compute_wrongly():
    model = untied_qwen3()
    assert head_weight(model) is model.lm_head.weight
    model.config.final_logit_softcapping = 30.0
    with pytest.raises(ConfigError, match="final_logit_softcapping"):
        head_weight(model)
    biased = untied_qwen3()
    biased.lm_head.bias = torch.nn.Parameter(torch.zeros(64))
    with pytest.raises(ConfigError, match="bias-free"):
        head_weight(biased)
