"""The OPD objective on a batch of LearnerSamples (torch, no Ray): forward, top-K reverse KL, weights.

Position p of a sample is supervised by the logits at p-1 (they predict token p). The loss is
``sum_i w_i * r_i * KL_i`` over supervised tokens, with w the blended weights computed for the
whole batch by the orchestrator and r the clipped importance ratio (no gradient). The LM head is
applied only at the supervised positions, in chunks fused with the KL (``lm_head.py``);
``full_logits_loss`` is the same loss through the model's full ``B x T x V`` logits, the reference
the tests and ``bench/learner_memory.py`` compare against.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from services.contracts.learner import LearnerSample
from services.contracts.records import TrajectoryTurnStats
from services.errors import ConfigError
from services.learner.lm_head import chunked_head_kl
from services.learner.topk_kl import TopKSupport, clipped_importance_ratio, topk_reverse_kl, weighted_opd_loss
from services.packing import pack_by_length
from services.settings.learner import DEFAULT_LOGITS_CHUNK_TOKENS


@dataclass(frozen=True)
class MicroBatch:
    """Right-padded rows and their supervised positions, flattened.

    There is no attention mask: under causal attention a real token attends only to the tokens
    before it, all real in a right-padded row, so a padding mask changes nothing it computes (the
    tests check it bit for bit) while it sends the attention down its masked path: with it, a
    truncated step's paired micro-batches took twice as long on CPU (``bench/padded_passes.py``).
    The padding's own outputs are never read.
    """

    input_ids_B_T: Tensor
    row_N: Tensor  # which padded row each supervised token is in
    logit_pos_N: Tensor  # p - 1: the logits that predict the token
    target_N: Tensor  # the token actually there
    top_ids_N_K: Tensor
    top_logprobs_N_K: Tensor
    weights_N: Tensor
    sampler_logprobs_N: Tensor
    counts: list[int]  # supervised tokens per sample, in order


def collate(samples: Sequence[LearnerSample], pad_id: int, device: torch.device) -> MicroBatch:
    """Right-pad the samples into one tensor batch and flatten their supervised positions."""
    width = max(len(s.token_ids) for s in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    rows, pos = [], []
    for b, s in enumerate(samples):
        ids[b, : len(s.token_ids)] = torch.tensor(s.token_ids)
        rows.append(torch.full((len(s.positions),), b, dtype=torch.long))
        pos.append(torch.tensor(s.positions, dtype=torch.long))
    row_N, pos_N = torch.cat(rows), torch.cat(pos)
    top_ids = torch.cat([torch.from_numpy(s.teacher_top_ids.unpack().astype("int64")) for s in samples])
    top_lp = torch.cat([torch.from_numpy(s.teacher_top_logprobs.unpack().astype("float32")) for s in samples])
    return MicroBatch(
        input_ids_B_T=ids.to(device),
        row_N=row_N.to(device),
        logit_pos_N=(pos_N - 1).to(device),
        target_N=ids[row_N, pos_N].to(device),
        top_ids_N_K=top_ids.to(device),
        top_logprobs_N_K=top_lp.to(device),
        weights_N=torch.tensor(
            [w for s in samples for w in s.token_weights], dtype=torch.float32, device=device
        ),
        sampler_logprobs_N=torch.tensor(
            [x for s in samples for x in s.sampler_logprobs], dtype=torch.float32, device=device
        ),
        counts=[len(s.positions) for s in samples],
    )


def micro_batch_loss(
    model: nn.Module,
    mb: MicroBatch,
    support: TopKSupport,
    clip_ratio: tuple[float, float],
    loss_scale: float = 1.0,
    chunk_tokens: int = DEFAULT_LOGITS_CHUNK_TOKENS,
    recompute: bool = True,
) -> tuple[Tensor, Tensor]:
    """(loss to backprop, per-token reverse KL detached) for one micro-batch; the LM head runs on
    ``chunk_tokens`` supervised positions at a time (``lm_head.chunked_head_kl``)."""
    hidden_B_T_H = final_hidden_states(model, mb.input_ids_B_T)
    hidden_N_H = hidden_B_T_H[mb.row_N, mb.logit_pos_N]
    del hidden_B_T_H
    kl_N, token_lp_N = chunked_head_kl(
        hidden_N_H,
        head_weight(model),  # after the forward: under FSDP the gathered (unsharded) weight
        mb.top_ids_N_K,
        mb.top_logprobs_N_K,
        mb.target_N,
        support,
        chunk_tokens,
        recompute,
    )
    return _opd_loss(mb, kl_N, token_lp_N, clip_ratio, loss_scale)


def _opd_loss(
    mb: MicroBatch, kl_N: Tensor, token_lp_N: Tensor, clip_ratio: tuple[float, float], loss_scale: float
) -> tuple[Tensor, Tensor]:
    """(sum_i w_i * r_i * KL_i scaled, KL detached), r the clipped ratio of the learner's log-probs."""
    ratio_N = clipped_importance_ratio(token_lp_N, mb.sampler_logprobs_N, *clip_ratio)
    return weighted_opd_loss(kl_N, mb.weights_N, ratio_N) * loss_scale, kl_N.detach()


def full_logits_loss(
    model: nn.Module,
    mb: MicroBatch,
    support: TopKSupport,
    clip_ratio: tuple[float, float],
    loss_scale: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """``micro_batch_loss`` through the model's full logits B x T x V (the reference; memory T x V)."""
    logits_B_T_V = model(input_ids=mb.input_ids_B_T).logits
    logits_N_V = logits_B_T_V[mb.row_N, mb.logit_pos_N]
    kl_N = topk_reverse_kl(logits_N_V, mb.top_ids_N_K, mb.top_logprobs_N_K, support)
    token_lp_N = torch.log_softmax(logits_N_V.float(), dim=-1).gather(-1, mb.target_N[:, None]).squeeze(-1)
    return _opd_loss(mb, kl_N, token_lp_N, clip_ratio, loss_scale)


def final_hidden_states(model: nn.Module, input_ids_B_T: Tensor) -> Tensor:
    """The backbone's last hidden states B x T x H (after its final norm) of right-padded rows.

    They are taken through the model's own forward, so FSDP's root hooks gather the embeddings,
    final norm and head (and keep them gathered until the backward); the head itself is applied
    to no position (``logits_to_keep`` is an empty index).
    """
    causal_lm: Any = model  # a Hugging Face causal LM
    captured: list[Tensor] = []
    handle = causal_lm.get_decoder().register_forward_hook(
        lambda _module, _args, output: captured.append(output.last_hidden_state)
    )
    try:
        model(
            input_ids=input_ids_B_T,
            use_cache=False,
            logits_to_keep=torch.empty(0, dtype=torch.long, device=input_ids_B_T.device),
        )
    finally:
        handle.remove()
    return captured[0]


def head_weight(model: nn.Module) -> Tensor:
    """The LM head's weight V x H (the embedding when tied); refuses heads this path does not
    reproduce: a bias, or logits scaled or soft-capped by the model (Qwen3 and Llama have none)."""
    causal_lm: Any = model  # a Hugging Face causal LM
    head = causal_lm.get_output_embeddings()
    config = getattr(model, "config", None)
    if not isinstance(head, nn.Linear) or head.bias is not None:
        raise ConfigError(f"{type(model).__name__}: the chunked LM head needs a bias-free nn.Linear head")
    for name in ("final_logit_softcapping", "logit_scale", "logits_scaling"):
        if getattr(config, name, None) not in (None, 1.0):
            raise ConfigError(
                f"{type(model).__name__}: config.{name} = {getattr(config, name)} is not applied by the "
                "chunked LM head"
            )
    return head.weight


def mini_batch_members(sample_ids: Sequence[int], mini_batches: int) -> list[list[int]]:
    """Local indices of a rank's samples in each of the step's mini-batches.

    Global trajectory i belongs to mini-batch ``i % mini_batches`` whichever rank holds it, so the
    mini-batches, and the updates, are the same for any number of ranks.
    """
    if mini_batches < 1:
        raise ValueError(f"mini_batches must be >= 1, got {mini_batches}")
    members: list[list[int]] = [[] for _ in range(mini_batches)]
    for local, global_id in enumerate(sample_ids):
        members[global_id % mini_batches].append(local)
    return members


def plan_micro_batches(lengths: Sequence[int], token_budget: int, pass_overhead: int = 0) -> list[list[int]]:
    """Group sample indices into micro-batches of at most ``token_budget`` padded tokens (rows x
    longest), at the least padded tokens plus ``pass_overhead`` per micro-batch
    (``services.packing.pack_by_length``)."""
    return pack_by_length(lengths, token_budget, max_rows=max(1, len(lengths)), pass_overhead=pass_overhead)


def turn_stats(sample: LearnerSample, kl_n: Tensor) -> TrajectoryTurnStats:
    """Supervised tokens and summed token KL per turn of one sample (and the teacher's entropy it carries)."""
    tokens = [0] * sample.num_turns
    sums = [0.0] * sample.num_turns
    for t, kl in zip(sample.turn_index, kl_n.tolist(), strict=True):
        tokens[t] += 1
        sums[t] += kl
    return TrajectoryTurnStats(
        turn_tokens=tokens,
        turn_kl_sum=sums,
        success=sample.success,
        truncated=sample.truncated,
        turn_entropy_sum=sample.turn_entropy_sum,
    )
