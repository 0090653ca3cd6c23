"""Sampling one token per row from ``softmax(logits / T)`` by inverse CDF, with the log-prob under it.

``torch.multinomial`` costs ~0.9 ms per decode step at batch 4 over an 8k vocabulary on this CPU;
a cumulative sum and a binary search draw from the same distribution in ~0.03 ms. One uniform
``u`` in ``(0, total]`` per row picks the first token whose cumulative probability reaches ``u``:
token ``i`` is picked with probability ``p_i / total``, and a token of probability zero (its
cumulative sum equal to its left neighbour's) can never be picked.

The random stream is the engine's private ``torch.Generator`` (one ``torch.rand`` draw per row and
step), so a seed still fixes the samples; it is not the stream ``torch.multinomial`` drew from
before 2026-11, so seeded runs sample different (equally distributed) tokens than they did then.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def sample_tokens(
    logits_B_V: "torch.Tensor", temperature: float, generator: "torch.Generator"
) -> tuple["torch.Tensor", "torch.Tensor"]:
    """Sample one token per row from ``softmax(logits / T)``; return (ids_B, logprobs_B) under it.

    At ``temperature == 0`` the argmax is taken and its log-prob is the unscaled ``log_softmax``'s.
    """
    import torch

    logits_B_V = logits_B_V.float()
    if temperature == 0.0:
        logprobs_B_V = torch.log_softmax(logits_B_V, dim=-1)
        ids_B = logprobs_B_V.argmax(dim=-1)
    else:
        logprobs_B_V = torch.log_softmax(logits_B_V / temperature, dim=-1)
        cdf_B_V = logprobs_B_V.exp().cumsum_(dim=-1)
        uniform_B = torch.rand(
            (logits_B_V.shape[0], 1), generator=generator, device=logits_B_V.device, dtype=cdf_B_V.dtype
        )
        u_B = (1.0 - uniform_B) * cdf_B_V[:, -1:]  # in (0, total]: never below a zero-probability step
        ids_B = torch.searchsorted(cdf_B_V, u_B).squeeze(-1)
    return ids_B, logprobs_B_V.gather(-1, ids_B[:, None]).squeeze(-1)
