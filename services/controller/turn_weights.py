"""Per-token loss weights: trajectory-level, turn-level, and their linear blend (paper Sec. 5.2).

Weights are given per segment (trajectory b, turn t) as the weight of *each* token in that segment;
a segment's mass is its per-token weight times its token count. Every scheme's masses sum to 1 over
the batch, so the loss is ``sum_i w_i * l_i``.

* Trajectory level (``seq-mean-token-mean``): every trajectory with supervised tokens gets mass 1/B,
  spread evenly over its N_b tokens: w = 1 / (B * N_b).
* Turn level: turn t is *reliable* when its survivor count n_t (trajectories reaching turn t) is at
  least n_min = max(min_floor, ceil(min_frac * n_traj)) and it has supervised tokens. Every reliable
  turn gets the same mass; inside a turn each trajectory segment with tokens gets an equal share,
  spread evenly over its tokens (the turn-level analogue of seq-mean-token-mean).
  Tokens of unreliable turns keep exactly their trajectory-level weight: they are neither amplified
  (their estimates are too thin) nor dropped; the reliable turns share the remaining mass
  1 - (trajectory-level mass of unreliable tokens). With no reliable turn, turn level = trajectory level.
* Blend: w = (1 - alpha) * w_traj + alpha * w_turn.
* Several task sources (``mixed_weights``): each source's part of the batch is blended on its own
  (its alpha, its survivors, its reliable turns), then the parts are scaled by the sources' shares.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from services.errors import InputError

SegmentWeights = list[list[float]]  # [trajectory][turn] -> weight of each token in that segment


def _check(turn_tokens: Sequence[Sequence[int]]) -> None:
    if not turn_tokens:
        raise InputError("empty batch: no trajectories")
    for b, row in enumerate(turn_tokens):
        if any(n < 0 for n in row):
            raise InputError(f"trajectory {b}: negative token count in {list(row)}")
    if sum(sum(row) for row in turn_tokens) == 0:
        raise InputError("batch has no supervised tokens")


def reliability_floor(n_traj: int, min_floor: int, min_frac: float) -> int:
    """n_min = max(min_floor, ceil(min_frac * n_traj)), with min_frac taken as the exact decimal."""
    return max(min_floor, math.ceil(Fraction(str(min_frac)) * n_traj))


def survivors(turn_tokens: Sequence[Sequence[int]]) -> list[int]:
    """n_t: how many trajectories reach 0-based turn t."""
    depth = max(len(row) for row in turn_tokens)
    return [sum(1 for row in turn_tokens if len(row) > t) for t in range(depth)]


def trajectory_weights(turn_tokens: Sequence[Sequence[int]]) -> SegmentWeights:
    """seq-mean-token-mean: w = 1 / (B * N_b), B counting trajectories with supervised tokens."""
    _check(turn_tokens)
    totals = [sum(row) for row in turn_tokens]
    n_batch = sum(1 for n in totals if n > 0)
    return [
        [1.0 / (n_batch * total) if total > 0 else 0.0 for _ in row]
        for row, total in zip(turn_tokens, totals, strict=True)
    ]


def reliable_turns(turn_tokens: Sequence[Sequence[int]], n_min: int) -> list[int]:
    """Turns with at least n_min survivors and at least one supervised token."""
    counts = survivors(turn_tokens)
    return [
        t
        for t, n in enumerate(counts)
        if n >= n_min and any(len(row) > t and row[t] > 0 for row in turn_tokens)
    ]


def turn_weights(turn_tokens: Sequence[Sequence[int]], n_min: int) -> SegmentWeights:
    """Equal mass per reliable turn; unreliable turns keep their trajectory-level weight (see module doc)."""
    traj = trajectory_weights(turn_tokens)
    reliable = set(reliable_turns(turn_tokens, n_min))
    if not reliable:
        return traj
    unreliable_mass = sum(
        w * n
        for row, wrow in zip(turn_tokens, traj, strict=True)
        for t, (n, w) in enumerate(zip(row, wrow, strict=True))
        if t not in reliable
    )
    per_turn = (1.0 - unreliable_mass) / len(reliable)
    segments_with_tokens = {t: sum(1 for row in turn_tokens if len(row) > t and row[t] > 0) for t in reliable}
    weights: SegmentWeights = []
    for row, wrow in zip(turn_tokens, traj, strict=True):
        out = []
        for t, (n, w) in enumerate(zip(row, wrow, strict=True)):
            if t not in reliable:
                out.append(w)
            elif n > 0:
                out.append(per_turn / (segments_with_tokens[t] * n))
            else:
                out.append(0.0)
        weights.append(out)
    return weights


def blended_weights(
    turn_tokens: Sequence[Sequence[int]], alpha: float, min_floor: int, min_frac: float
) -> SegmentWeights:
    """w = (1 - alpha) * w_traj + alpha * w_turn, with the reliability floor from the batch size."""
    if not 0.0 <= alpha <= 1.0 or math.isnan(alpha):
        raise InputError(f"alpha must be in [0, 1], got {alpha}")
    traj = trajectory_weights(turn_tokens)
    if alpha == 0.0:
        return traj
    turn = turn_weights(turn_tokens, reliability_floor(len(turn_tokens), min_floor, min_frac))
    return [
        [(1.0 - alpha) * a + alpha * b for a, b in zip(ra, rb, strict=True)]
        for ra, rb in zip(traj, turn, strict=True)
    ]


def segment_masses(turn_tokens: Sequence[Sequence[int]], weights: SegmentWeights) -> list[list[float]]:
    """Mass of each segment: per-token weight times its token count."""
    return [
        [w * n for n, w in zip(row, wrow, strict=True)]
        for row, wrow in zip(turn_tokens, weights, strict=True)
    ]


@dataclass(frozen=True)
class SourcePart:
    """One source's part of a multi-source batch: its trajectories (batch indices), its share of the
    batch, its blend ``alpha`` and its reliability floor (``[blend] min_floor``/``min_frac``)."""

    indices: Sequence[int]
    share: float
    alpha: float
    min_floor: int
    min_frac: float


def mixed_weights(turn_tokens: Sequence[Sequence[int]], parts: Sequence[SourcePart]) -> SegmentWeights:
    """Per-source blended weights, combined by the sources' shares.

    Within source e (trajectories B_e, share pi_e) the weights are ``blended_weights`` of B_e alone,
    with e's alpha and with survivor counts, reliable turns and n_min from B_e: their masses sum to 1
    over B_e. The batch weight is w_i = pi_e / (sum of the shares of the sources in the batch) * w^e_i,
    so the masses sum to 1 over the batch and each source carries its share. One source with share 1
    gives ``blended_weights`` exactly.
    """
    _check(turn_tokens)
    covered = sorted(i for part in parts for i in part.indices)
    if covered != list(range(len(turn_tokens))):
        raise InputError(f"the sources' parts must cover the {len(turn_tokens)} trajectories once each")
    present = [part for part in parts if part.indices]
    total = math.fsum(part.share for part in present)
    weights: SegmentWeights = [[] for _ in turn_tokens]
    for part in present:
        rows = [turn_tokens[i] for i in part.indices]
        own = blended_weights(rows, part.alpha, part.min_floor, part.min_frac)
        scale = part.share / total
        for i, row in zip(part.indices, own, strict=True):
            weights[i] = row if scale == 1.0 else [scale * w for w in row]
    return weights
