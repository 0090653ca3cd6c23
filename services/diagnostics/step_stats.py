"""Turn-resolved statistics of one optimizer step's batch (paper Sec. 4), pure Python.

Per 0-based turn t: survivors n_t (trajectories reaching t), supervised tokens, raw KL
K_t = (sum of token KL at turn t) / (tokens at turn t) over trajectories reaching t, the same split
by outcome (K_t^succ, K_t^fail, G_t = K_t^fail - K_t^succ), and each turn's share of the batch's
KL loss mass sum_i w_i l_i under trajectory-level weights and under the step's actual blended weights.
"""

from dataclasses import dataclass

from services.contracts.records import TrajectoryTurnStats, TurnStatsRecord
from services.controller.turn_weights import SegmentWeights, blended_weights, survivors, trajectory_weights


@dataclass(frozen=True)
class StepStats:
    step: int
    probe: bool
    alpha: float
    survivors: list[int]
    tokens: list[int]
    kl: list[float | None]
    kl_succ: list[float | None]
    kl_fail: list[float | None]
    share_traj: list[float]
    share_actual: list[float]

    @property
    def depth(self) -> int:
        return len(self.survivors)

    def gap(self, t: int) -> float | None:
        """G_t = K_t^fail - K_t^succ, None when either side has no tokens at turn t."""
        succ, fail = self.kl_succ[t], self.kl_fail[t]
        return None if succ is None or fail is None else fail - succ


def pooled_kl(trajectories: list[TrajectoryTurnStats], depth: int) -> list[float | None]:
    """Token-pooled mean KL per turn over the given trajectories (None where they have no tokens)."""
    out: list[float | None] = []
    for t in range(depth):
        tokens = sum(tr.turn_tokens[t] for tr in trajectories if len(tr.turn_tokens) > t)
        kl_sum = sum(tr.turn_kl_sum[t] for tr in trajectories if len(tr.turn_tokens) > t)
        out.append(kl_sum / tokens if tokens > 0 else None)
    return out


def mean_token_kl(trajectories: list[TrajectoryTurnStats], turns: int) -> float | None:
    """Token-pooled mean KL over the first ``turns`` turns of the trajectories (None: no tokens there):
    batches rolled out to different depths compared on the turns both reached."""
    tokens = sum(sum(tr.turn_tokens[:turns]) for tr in trajectories)
    return sum(sum(tr.turn_kl_sum[:turns]) for tr in trajectories) / tokens if tokens > 0 else None


def loss_shares(trajectories: list[TrajectoryTurnStats], weights: SegmentWeights, depth: int) -> list[float]:
    """Share of sum_i w_i l_i contributed by each turn (all zeros when the batch's loss mass is zero)."""
    per_turn = [0.0] * depth
    for tr, wrow in zip(trajectories, weights, strict=True):
        for t, (kl_sum, w) in enumerate(zip(tr.turn_kl_sum, wrow, strict=True)):
            per_turn[t] += w * kl_sum
    total = sum(per_turn)
    return [m / total for m in per_turn] if total != 0.0 else [0.0] * depth


def step_stats(record: TurnStatsRecord, min_floor: int, min_frac: float) -> StepStats:
    """All per-turn statistics of one step; ``min_floor``/``min_frac`` give the blend's reliability floor."""
    trajs = record.trajectories
    tokens_rows = [tr.turn_tokens for tr in trajs]
    counts = survivors(tokens_rows)
    depth = len(counts)
    succ = [tr for tr in trajs if tr.success]
    fail = [tr for tr in trajs if not tr.success]
    return StepStats(
        step=record.step,
        probe=record.probe,
        alpha=record.alpha,
        survivors=counts,
        tokens=[sum(r[t] for r in tokens_rows if len(r) > t) for t in range(depth)],
        kl=pooled_kl(trajs, depth),
        kl_succ=pooled_kl(succ, depth),
        kl_fail=pooled_kl(fail, depth),
        share_traj=loss_shares(trajs, trajectory_weights(tokens_rows), depth),
        share_actual=loss_shares(
            trajs, blended_weights(tokens_rows, record.alpha, min_floor, min_frac), depth
        ),
    )
