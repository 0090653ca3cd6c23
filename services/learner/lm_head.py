"""The LM head fused with the top-K reverse KL, computed in chunks of supervised positions only.

For N supervised positions with final hidden states h_N_H (after the backbone's final norm) and
the head's weight W_V_H, chunk c of at most C positions computes

    ls_C_V = log_softmax(float(h_C_H @ W_V_H^T)),
    KL_C   = support_reverse_kl(ls_C_V[teacher top-K ids], teacher top-K log-probs)   (topk_kl.py),
    lp_C   = ls_C_V[sampled token]                      (the learner's log-prob, for the ratio),

and keeps neither the logits nor the log-probs: each chunk runs under activation checkpointing, so
its C x V tensors are freed after the forward and recomputed in the backward. Peak memory of the
head is then O(C x V + N x (H + K)) rather than the O(B x T x V) of full logits; the recompute
costs one more C x H x V matmul per chunk. The values are those of the full-logits computation
(``objective.full_logits_loss``) up to float rounding.
"""

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from services.learner.topk_kl import TopKSupport, support_reverse_kl


def head_logprobs(hidden_C_H: Tensor, weight_V_H: Tensor) -> Tensor:
    """log_softmax over the vocabulary of ``hidden @ weight^T``; bf16 logits are lifted to fp32."""
    logits_C_V = hidden_C_H @ weight_V_H.T
    return torch.log_softmax(logits_C_V.to(torch.promote_types(logits_C_V.dtype, torch.float32)), dim=-1)


def _chunk(
    hidden_C_H: Tensor,
    weight_V_H: Tensor,
    teacher_ids_C_K: Tensor,
    teacher_logprobs_C_K: Tensor,
    target_C: Tensor,
    support: TopKSupport,
) -> tuple[Tensor, Tensor]:
    logprobs_C_V = head_logprobs(hidden_C_H, weight_V_H)
    kl_C = support_reverse_kl(logprobs_C_V.gather(-1, teacher_ids_C_K), teacher_logprobs_C_K, support)
    return kl_C, logprobs_C_V.gather(-1, target_C[:, None]).squeeze(-1).detach()


def chunked_head_kl(
    hidden_N_H: Tensor,
    weight_V_H: Tensor,
    teacher_ids_N_K: Tensor,
    teacher_logprobs_N_K: Tensor,
    target_N: Tensor,
    support: TopKSupport,
    chunk_tokens: int,
    recompute: bool = True,
) -> tuple[Tensor, Tensor]:
    """(per-position reverse KL with gradient, the sampled tokens' log-probs without), both (N,).

    ``recompute=False`` keeps every chunk's log-probs for the backward (faster, memory N x V).
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    parts = zip(
        torch.split(hidden_N_H, chunk_tokens),
        torch.split(teacher_ids_N_K, chunk_tokens),
        torch.split(teacher_logprobs_N_K, chunk_tokens),
        torch.split(target_N, chunk_tokens),
        strict=True,
    )
    kls, token_lps = [], []
    for hidden_C_H, ids_C_K, lt_C_K, target_C in parts:
        if recompute and torch.is_grad_enabled():
            kl_C, lp_C = checkpoint(
                _chunk,
                hidden_C_H,
                weight_V_H,
                ids_C_K,
                lt_C_K,
                target_C,
                support,
                use_reentrant=False,
                preserve_rng_state=False,
            )
        else:
            kl_C, lp_C = _chunk(hidden_C_H, weight_V_H, ids_C_K, lt_C_K, target_C, support)
        kls.append(kl_C)
        token_lps.append(lp_C)
    return torch.cat(kls), torch.cat(token_lps)
