"""A step's data shaped for the learner (pure: no Ray, FastAPI or Redis).

1. ``supervised_trajectories``: the trajectories with at least one response token. Only they are
   scored by the teacher and trained on; the step counts the others as failed episodes
   (``no_response``). Each is scored and trained on up to its last response token only
   (``scored_ids``): the tokens after it are read at no supervised position, so cutting them
   loses nothing, and the last observation never costs the teacher's or the learner's context.
2. ``TeacherScores``: the teacher's answer for one trajectory's supervised tokens, in order.
3. ``learner_batch``: the blended per-token weights over the whole batch, and one
   ``LearnerSample`` per trajectory carrying its teacher top-K and the teacher's entropy summed per
   turn, so the turn statistics the learner returns are complete as they come back.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from services.contracts.arrays import PackedArray
from services.contracts.controller import StepPlan
from services.contracts.learner import LearnerBatch, LearnerSample
from services.contracts.trajectory import Trajectory
from services.controller.turn_weights import SegmentWeights, blended_weights
from services.errors import InputError


@dataclass(frozen=True)
class TeacherScores:
    """The teacher on one trajectory's supervised tokens, in order: [n, K] top-K ids and log-probs,
    and the full-vocabulary entropy (nats) at each token (None: not recorded)."""

    top_ids: np.ndarray
    top_logprobs: np.ndarray
    entropy: np.ndarray | None = None


def supervised_positions(trajectory: Trajectory) -> tuple[list[int], list[int]]:
    """Indices of every response token and the 0-based turn each belongs to."""
    positions: list[int] = []
    turns: list[int] = []
    for turn in trajectory.turns:
        positions.extend(range(turn.response_start, turn.response_end))
        turns.extend([turn.index] * (turn.response_end - turn.response_start))
    return positions, turns


def scored_length(trajectory: Trajectory) -> int:
    """Tokens the teacher scores and the learner reads: up to the last response token (0: no turn)."""
    return trajectory.turns[-1].response_end if trajectory.turns else 0


def scored_ids(trajectory: Trajectory) -> list[int]:
    """The trajectory's ids up to its last response token (a causal model reads nothing after it at
    a supervised position: the last observation, an ``<|im_end|>`` closing a cut-off response)."""
    return trajectory.token_ids[: scored_length(trajectory)]


def has_supervised_tokens(trajectory: Trajectory) -> bool:
    return sum(trajectory.turn_tokens) > 0


def supervised_trajectories(trajectories: Sequence[Trajectory]) -> list[Trajectory]:
    """The trajectories with at least one response token, in their order."""
    return [tr for tr in trajectories if has_supervised_tokens(tr)]


def turn_entropy_sums(trajectory: Trajectory, entropy_P: np.ndarray) -> list[float]:
    """Sum of the teacher's entropy over each 0-based turn's supervised tokens."""
    _positions, turns = supervised_positions(trajectory)
    if len(turns) != entropy_P.shape[0]:
        raise InputError(
            f"episode {trajectory.episode_id}: {entropy_P.shape[0]} entropies for {len(turns)} tokens"
        )
    sums = [0.0] * len(trajectory.turns)
    for t, h in zip(turns, entropy_P.tolist(), strict=True):
        sums[t] += h
    return sums


def learner_samples(
    trajectories: Sequence[Trajectory],
    scores: Sequence[TeacherScores],
    alpha: float,
    min_floor: int,
    min_frac: float,
) -> list[LearnerSample]:
    """One LearnerSample per supervised trajectory, its weights blended over all of them."""
    check_supervised(trajectories, scores)
    weights = blended_weights([tr.turn_tokens for tr in trajectories], alpha, min_floor, min_frac)
    return build_samples(trajectories, scores, weights)


def check_supervised(trajectories: Sequence[Trajectory], scores: Sequence[TeacherScores]) -> None:
    """InputError unless every trajectory has supervised tokens and its teacher's scores."""
    if len(trajectories) != len(scores):
        raise InputError(f"{len(trajectories)} trajectories but {len(scores)} teacher score sets")
    if not trajectories:
        raise InputError("no trajectory in the batch has supervised tokens")
    unsupervised = [tr.episode_id for tr in trajectories if not has_supervised_tokens(tr)]
    if unsupervised:
        raise InputError(f"episodes without supervised tokens reached the learner batch: {unsupervised[:3]}")


def build_samples(
    trajectories: Sequence[Trajectory], scores: Sequence[TeacherScores], weights: SegmentWeights
) -> list[LearnerSample]:
    """One LearnerSample per (checked) trajectory with its per-segment loss ``weights``."""
    samples = []
    for tr, sc, seg_w in zip(trajectories, scores, weights, strict=True):
        positions, turns = supervised_positions(tr)
        if sc.top_ids.shape[0] != len(positions):
            raise InputError(
                f"episode {tr.episode_id}: teacher scored {sc.top_ids.shape[0]} of {len(positions)} tokens"
            )
        samples.append(
            LearnerSample(
                token_ids=scored_ids(tr),
                positions=positions,
                turn_index=turns,
                token_weights=[seg_w[t] for t in turns],
                sampler_logprobs=tr.sampler_logprobs,
                teacher_top_ids=PackedArray.pack(sc.top_ids.astype(np.int64)),
                teacher_top_logprobs=PackedArray.pack(sc.top_logprobs.astype(np.float32)),
                num_turns=len(tr.turns),
                success=tr.success,
                truncated=tr.truncated,
                turn_entropy_sum=None if sc.entropy is None else turn_entropy_sums(tr, sc.entropy),
            )
        )
    return samples


def learner_batch(
    plan: StepPlan,
    trajectories: Sequence[Trajectory],
    scores: Sequence[TeacherScores],
    min_floor: int,
    min_frac: float,
) -> LearnerBatch:
    """Step ``plan.step``'s work for the learner; ``trajectories`` are the supervised ones, in batch order."""
    return LearnerBatch(
        step=plan.step,
        probe=plan.probe,
        alpha=plan.alpha,
        h_roll=plan.h_roll,
        samples=learner_samples(trajectories, scores, plan.alpha, min_floor, min_frac),
    )
