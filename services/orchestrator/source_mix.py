"""One step over several task sources (pure): each source's part of the batch, the loss weights
blended within each part and combined by the shares (``turn_weights.mixed_weights``), and each
source's turn statistics split back out for its own controller.

A single-source step is the special case of one part with share 1: its weights, batch and turn
statistics are exactly those of the single-source functions.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from services.contracts.controller import StepPlan
from services.contracts.learner import LearnerBatch
from services.contracts.records import TurnStatsRecord
from services.contracts.rollout import Trajectory
from services.errors import InputError
from services.learner.turn_weights import SourcePart, mixed_weights
from services.orchestrator.step_data import TeacherScores, build_samples, check_supervised
from services.settings.task_mix import TaskSource


@dataclass(frozen=True)
class SourceBatch:
    """One source's part of step k: its plan, and its supervised trajectories with their teacher's scores."""

    source: TaskSource
    plan: StepPlan
    trajectories: Sequence[Trajectory]
    scores: Sequence[TeacherScores]


def part_indices(parts: Sequence[SourceBatch]) -> list[range]:
    """Where each part's trajectories sit in the step's batch (parts in order)."""
    out, at = [], 0
    for part in parts:
        out.append(range(at, at + len(part.trajectories)))
        at += len(part.trajectories)
    return out


def mixed_learner_batch(step: int, parts: Sequence[SourceBatch]) -> LearnerBatch:
    """The learner's batch of a step over several sources: their trajectories in order, each part's
    weights blended with its own alpha and reliability floor, scaled by its share. The batch's
    ``alpha`` is the share-weighted mean of the parts' (a record; the weights carry the parts' own),
    ``probe`` whether any part probes, ``h_roll`` the deepest part's."""
    present = [p for p in parts if p.trajectories]
    if not present:
        raise InputError(f"step {step}: no source has a supervised trajectory")
    trajectories = [t for p in parts for t in p.trajectories]
    scores = [s for p in parts for s in p.scores]
    check_supervised(trajectories, scores)
    weights = mixed_weights(
        [t.turn_tokens for t in trajectories],
        [
            SourcePart(
                indices, p.source.share, p.plan.alpha, p.source.blend.min_floor, p.source.blend.min_frac
            )
            for p, indices in zip(parts, part_indices(parts), strict=True)
        ],
    )
    total = sum(p.source.share for p in present)
    return LearnerBatch(
        step=step,
        probe=any(p.plan.probe for p in present),
        alpha=min(1.0, sum(p.source.share * p.plan.alpha for p in present) / total),
        h_roll=max(p.plan.h_roll for p in present),
        samples=build_samples(trajectories, scores, weights),
    )


def source_turn_stats(record: TurnStatsRecord, parts: Sequence[SourceBatch]) -> list[TurnStatsRecord]:
    """Each part's own turn statistics (its plan's probe, alpha and depth, its ``env``), from the
    learner's record of the whole batch; a part without trajectories has none."""
    out = []
    for part, indices in zip(parts, part_indices(parts), strict=True):
        if not indices:
            continue
        out.append(
            TurnStatsRecord(
                step=record.step,
                probe=part.plan.probe,
                alpha=part.plan.alpha,
                h_roll=part.plan.h_roll,
                trajectories=[record.trajectories[i] for i in indices],
                env=part.source.env,
            )
        )
    return out
