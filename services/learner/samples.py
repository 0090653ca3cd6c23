"""Shape a step's trajectories and teacher scores into LearnerSamples with blended per-token weights."""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from services.contracts.arrays import PackedArray
from services.contracts.learner import LearnerSample
from services.contracts.trajectory import Trajectory
from services.errors import InputError
from services.learner.turn_weights import blended_weights


@dataclass(frozen=True)
class TeacherTopK:
    """The teacher's top-K for one trajectory's supervised tokens, in order: [n, K] ids and log-probs."""

    top_ids: np.ndarray
    top_logprobs: np.ndarray


def supervised_positions(trajectory: Trajectory) -> tuple[list[int], list[int]]:
    """Indices of every response token and the 0-based turn each belongs to."""
    positions: list[int] = []
    turns: list[int] = []
    for turn in trajectory.turns:
        positions.extend(range(turn.response_start, turn.response_end))
        turns.extend([turn.index] * (turn.response_end - turn.response_start))
    return positions, turns


def build_samples(
    trajectories: Sequence[Trajectory],
    teacher: Sequence[TeacherTopK],
    alpha: float,
    min_floor: int,
    min_frac: float,
) -> list[LearnerSample]:
    """One LearnerSample per trajectory that has supervised tokens; weights are blended over the batch."""
    if len(trajectories) != len(teacher):
        raise InputError(f"{len(trajectories)} trajectories but {len(teacher)} teacher score sets")
    kept = [(tr, sc) for tr, sc in zip(trajectories, teacher, strict=True) if sum(tr.turn_tokens) > 0]
    if not kept:
        raise InputError("no trajectory in the batch has supervised tokens")
    weights = blended_weights([tr.turn_tokens for tr, _ in kept], alpha, min_floor, min_frac)
    samples = []
    for (tr, sc), seg_w in zip(kept, weights, strict=True):
        positions, turns = supervised_positions(tr)
        if sc.top_ids.shape[0] != len(positions):
            raise InputError(
                f"episode {tr.episode_id}: teacher scored {sc.top_ids.shape[0]} of {len(positions)} tokens"
            )
        samples.append(
            LearnerSample(
                token_ids=tr.token_ids,
                positions=positions,
                turn_index=turns,
                token_weights=[seg_w[t] for t in turns],
                sampler_logprobs=tr.sampler_logprobs,
                teacher_top_ids=PackedArray.pack(sc.top_ids.astype(np.int64)),
                teacher_top_logprobs=PackedArray.pack(sc.top_logprobs.astype(np.float32)),
                num_turns=len(tr.turns),
                success=tr.success,
                truncated=tr.truncated,
            )
        )
    return samples
