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


class NoDistributionError(ValueError):
    """A row of logits that names no distribution (a NaN or +inf in it, or every entry -inf): a
    model that produced it is broken, so it is refused rather than sampled from (torch's
    ``multinomial`` refuses such rows too)."""


def refuse_rows_without_distribution(logits_B_V: "torch.Tensor") -> None:
    """``NoDistributionError`` naming the first row of ``logits`` that holds a NaN or +inf or is all
    -inf (one reduction over the rows: a row's max is NaN, +inf or -inf exactly then)."""
    import torch

    top_B = logits_B_V.amax(dim=-1)
    bad = (~torch.isfinite(top_B)).nonzero()
    if len(bad):
        raise no_distribution(int(bad[0]), float(top_B[bad[0]]))


def no_distribution(row: int, top: float) -> NoDistributionError:
    """The error for row ``row``, whose maximum is ``top`` (-inf: every entry is -inf)."""
    what = "is all -inf" if top == float("-inf") else "holds a NaN or +inf"
    return NoDistributionError(f"row {row} of the logits {what}: there is no distribution to sample from")


def sample_tokens(
    logits_B_V: "torch.Tensor", temperature: float, generator: "torch.Generator"
) -> tuple["torch.Tensor", "torch.Tensor"]:
    """Sample one token per row from ``softmax(logits / T)``; return (ids_B, logprobs_B) under it.

    At ``temperature == 0`` the argmax is taken and its log-prob is the unscaled ``log_softmax``'s
    (no uniform is drawn). A row without a distribution is a ``NoDistributionError``.
    """
    import torch

    uniform_B = None
    if temperature != 0.0:
        shape = (logits_B_V.shape[0], 1)
        uniform_B = torch.rand(shape, generator=generator, device=logits_B_V.device, dtype=torch.float32)
    return tokens_at(logits_B_V, temperature, uniform_B)


def tokens_at(
    logits_B_V: "torch.Tensor", temperature: float, uniform_B: "torch.Tensor | None"
) -> tuple["torch.Tensor", "torch.Tensor"]:
    """``sample_tokens`` given its uniforms ``uniform_B`` (``[B, 1]`` in ``[0, 1)``; None at
    temperature 0): row ``b`` takes the first token whose cumulative probability reaches
    ``(1 - u_b)`` of the total."""
    import torch

    logits_B_V = logits_B_V.float()
    refuse_rows_without_distribution(logits_B_V)
    if temperature == 0.0:
        logprobs_B_V = torch.log_softmax(logits_B_V, dim=-1)
        ids_B = logprobs_B_V.argmax(dim=-1)
    else:
        if uniform_B is None:
            raise ValueError(f"sampling at temperature {temperature} needs a uniform per row")
        logprobs_B_V = torch.log_softmax(logits_B_V / temperature, dim=-1)
        cdf_B_V = logprobs_B_V.exp().cumsum_(dim=-1)
        u_B = (1.0 - uniform_B.to(cdf_B_V.dtype)) * cdf_B_V[:, -1:]  # in (0, total]: never a zero step
        ids_B = torch.searchsorted(cdf_B_V, u_B).squeeze(-1)
    return ids_B, logprobs_B_V.gather(-1, ids_B[:, None]).squeeze(-1)
