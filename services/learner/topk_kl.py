"""Top-K reverse KL(student || teacher) on the teacher's top-K support, and the importance-ratio clip.

For a position with teacher top-K ids S (true full-vocabulary log-probs lt_j) and student
log-probs ls_j = log_softmax(student logits)_j, the support is made a proper distribution:

* ``tail`` (default): add one bucket holding the rest of each side's mass,
      ls_tail = log(1 - sum_{j in S} exp(ls_j)),  lt_tail likewise, and
      KL = sum_{j in S} e^{ls_j} (ls_j - lt_j) + e^{ls_tail} (ls_tail - lt_tail).
  Student mass leaking outside the teacher's top-K is penalised through the bucket.
* ``renorm``: renormalise both sides over S and take KL of the renormalised distributions.

Both equal the full-vocabulary reverse KL when K = V. Guards: everything stays in log space
(logsumexp, log1mexp), and the tail log-mass is floored at log(TAIL_FLOOR) so no log(0) appears
when the top-K already holds (numerically) all the mass.
"""

import math
from typing import Literal

import torch
from torch import Tensor

TopKSupport = Literal["tail", "renorm"]
TAIL_FLOOR = 1e-10
_LOG_TAIL_FLOOR = math.log(TAIL_FLOOR)


def log1mexp(x: Tensor) -> Tensor:
    """log(1 - exp(x)) for x <= 0, accurate on both sides of -log 2 (Maechler 2012)."""
    x = x.clamp(max=-TAIL_FLOOR)
    return torch.where(x > -math.log(2.0), torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))


def tail_logmass(logprobs_N_K: Tensor) -> Tensor:
    """Log of the probability mass outside the K ids, floored at log(TAIL_FLOOR)."""
    return log1mexp(torch.logsumexp(logprobs_N_K, dim=-1)).clamp(min=_LOG_TAIL_FLOOR)


def topk_reverse_kl(
    student_logits_N_V: Tensor,
    teacher_ids_N_K: Tensor,
    teacher_logprobs_N_K: Tensor,
    support: TopKSupport = "tail",
) -> Tensor:
    """Per-position reverse KL(student || teacher) on the teacher's top-K support; shape (N,)."""
    # bf16/fp16 logits are lifted to fp32 for the softmax; fp64 stays fp64 (gradient checks).
    compute_dtype = torch.promote_types(student_logits_N_V.dtype, torch.float32)
    student_logprobs_N_V = torch.log_softmax(student_logits_N_V.to(compute_dtype), dim=-1)
    return support_reverse_kl(student_logprobs_N_V.gather(-1, teacher_ids_N_K), teacher_logprobs_N_K, support)


def support_reverse_kl(
    student_logprobs_N_K: Tensor, teacher_logprobs_N_K: Tensor, support: TopKSupport = "tail"
) -> Tensor:
    """The same from the student's full-vocabulary log-probs already gathered at the top-K ids."""
    ls_N_K = student_logprobs_N_K
    lt_N_K = teacher_logprobs_N_K.to(ls_N_K.dtype)
    match support:
        case "tail":
            kl_N = (ls_N_K.exp() * (ls_N_K - lt_N_K)).sum(-1)
            ls_tail_N, lt_tail_N = tail_logmass(ls_N_K), tail_logmass(lt_N_K)
            return kl_N + ls_tail_N.exp() * (ls_tail_N - lt_tail_N)
        case "renorm":
            ls_N_K = ls_N_K - torch.logsumexp(ls_N_K, dim=-1, keepdim=True)
            lt_N_K = lt_N_K - torch.logsumexp(lt_N_K, dim=-1, keepdim=True)
            return (ls_N_K.exp() * (ls_N_K - lt_N_K)).sum(-1)
        case _:
            raise ValueError(f"unknown top-K support {support!r}; expected 'tail' or 'renorm'")


def clipped_importance_ratio(
    student_token_logprobs_N: Tensor, sampler_logprobs_N: Tensor, clip_low: float, clip_high: float
) -> Tensor:
    """sg(clip(pi_theta(y)/pi_sampler(y), 1 - low, 1 + high)): corrects sampler/learner mismatch, no gradient."""
    ratio_N = torch.exp(student_token_logprobs_N.detach().float() - sampler_logprobs_N.float())
    return ratio_N.clamp(min=1.0 - clip_low, max=1.0 + clip_high)


def weighted_opd_loss(kl_N: Tensor, token_weights_N: Tensor, ratio_N: Tensor | None = None) -> Tensor:
    """L = sum_i w_i * r_i * l_i with blended per-token weights w (summing to 1 over the batch)."""
    weights_N = token_weights_N.to(kl_N.dtype)
    if ratio_N is not None:
        weights_N = weights_N * ratio_N.to(kl_N.dtype)
    return (weights_N * kl_N).sum()
