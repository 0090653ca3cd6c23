"""Attach the teacher's per-turn entropy to a step's turn statistics (pure).

The teacher scorer returns the full-vocabulary entropy of its next-token distribution at every
supervised position (nats); the paper's diagnosis plots its per-turn mean next to the per-turn KL.
The learner's ``TurnStatsRecord`` lists the step's trajectories that have supervised tokens, in
batch order; ``with_teacher_entropy`` adds each one's entropy sum per turn.
"""

from collections.abc import Sequence

import numpy as np

from services.contracts.records import TurnStatsRecord
from services.contracts.trajectory import Trajectory
from services.errors import InputError
from services.learner.samples import supervised_positions


def turn_entropy_sums(trajectory: Trajectory, entropy_P: np.ndarray) -> list[float]:
    """Sum of the entropy of each supervised token, per 0-based turn of ``trajectory``."""
    _positions, turns = supervised_positions(trajectory)
    if len(turns) != entropy_P.shape[0]:
        raise InputError(
            f"episode {trajectory.episode_id}: {entropy_P.shape[0]} entropies for {len(turns)} tokens"
        )
    sums = [0.0] * len(trajectory.turns)
    for t, h in zip(turns, entropy_P.tolist(), strict=True):
        sums[t] += h
    return sums


def with_teacher_entropy(
    record: TurnStatsRecord, trajectories: Sequence[Trajectory], entropies: Sequence[np.ndarray]
) -> TurnStatsRecord:
    """``record`` with ``turn_entropy_sum`` filled; ``trajectories``/``entropies`` are the whole rollout."""
    kept = [(tr, h) for tr, h in zip(trajectories, entropies, strict=True) if sum(tr.turn_tokens) > 0]
    if len(kept) != len(record.trajectories):
        raise InputError(
            f"step {record.step}: {len(kept)} scored trajectories, {len(record.trajectories)} stats"
        )
    rows = []
    for stats, (tr, h) in zip(record.trajectories, kept, strict=True):
        if list(tr.turn_tokens) != stats.turn_tokens:
            raise InputError(
                f"step {record.step}: episode {tr.episode_id} does not match its turn statistics"
            )
        rows.append(stats.model_copy(update={"turn_entropy_sum": turn_entropy_sums(tr, h)}))
    return TurnStatsRecord.model_validate(
        {**record.model_dump(), "trajectories": [r.model_dump() for r in rows]}
    )
