"""One step over several task sources (pure): each source's part of the batch, the loss weights
blended within each part and combined by the shares (``turn_weights.mixed_weights``), and each
source's turn statistics split back out for its own controller.

A single-source step is the special case of one part with share 1: its weights, batch and turn
statistics are exactly those of the single-source functions.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from services.contracts.controller import ProbeStats, StepDecision, StepPlan
from services.contracts.learner import LearnerBatch
from services.contracts.records import TurnStatsRecord
from services.contracts.rollout import EpisodeTask
from services.contracts.trajectory import Trajectory
from services.controller.turn_weights import SourcePart, mixed_weights
from services.errors import InputError
from services.orchestrator.probe_stats import probe_stats
from services.orchestrator.step_data import TeacherScores, build_samples, check_supervised
from services.settings.task_mix import TaskSource
from services.settings.tree import TurnOPDSettings


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


class ControllerLike(Protocol):
    def plan(self, step: int, lag: int = 0, env: str | None = None) -> StepPlan: ...

    def ingest(
        self, step: int, stats: ProbeStats | None, lag: int = 0, env: str | None = None
    ) -> StepDecision: ...


@dataclass(frozen=True)
class StepSources:
    """The task sources every step plays, and the key of each one's controller (None: the run's only
    controller, a single-source run, called exactly as before sources existed)."""

    sources: tuple[TaskSource, ...]
    keys: tuple[str | None, ...]

    @classmethod
    def of(cls, settings: TurnOPDSettings) -> "StepSources":
        sources = tuple(settings.task_sources())
        keys = tuple(s.env for s in sources) if settings.sources else (None,)
        return cls(sources, keys)

    @property
    def single(self) -> bool:
        return self.keys == (None,)

    def plans(self, controller: ControllerLike, step: int, lag: int = 0) -> list[StepPlan]:
        """Each source's plan of ``step`` from its controller."""
        if self.single:
            return [controller.plan(step, lag)]
        return [controller.plan(step, lag, key) for key in self.keys]

    def depths(self, plans: Sequence[StepPlan], tasks: Sequence[EpisodeTask]) -> int | list[int]:
        """The rollout depth of every task: its source's plan's ``h_roll`` (one number for one source)."""
        if self.single:
            return plans[0].h_roll
        by_env = {s.env: p.h_roll for s, p in zip(self.sources, plans, strict=True)}
        return [by_env[task.env] for task in tasks]

    def parts(
        self, plans: Sequence[StepPlan], trajectories: Sequence[Trajectory], scores: Sequence[TeacherScores]
    ) -> list[SourceBatch]:
        """The step's supervised trajectories (source order) and scores split into the sources' parts."""
        if self.single:
            return [SourceBatch(self.sources[0], plans[0], list(trajectories), list(scores))]
        return [
            SourceBatch(
                source,
                plan,
                [t for t in trajectories if t.env == source.env],
                [s for t, s in zip(trajectories, scores, strict=True) if t.env == source.env],
            )
            for source, plan in zip(self.sources, plans, strict=True)
        ]

    def turn_stats(self, record: TurnStatsRecord, parts: Sequence[SourceBatch]) -> list[TurnStatsRecord]:
        """The step's turn statistics as written: the learner's record (one source), else one per source."""
        return [record] if self.single else source_turn_stats(record, parts)

    def ingest(
        self,
        controller: ControllerLike,
        step: int,
        parts: Sequence[SourceBatch],
        records: Sequence[TurnStatsRecord],
        lag: int = 0,
    ) -> list[StepDecision]:
        """Complete ``step`` in every source's controller, each with its own probe statistics; the
        decisions name their source's env (a multi-source run)."""
        if self.single:
            stats = probe_stats(records[0]) if parts[0].plan.probe else None
            return [controller.ingest(step, stats, lag)]
        by_env = {r.env: r for r in records}
        decisions = []
        for part, key in zip(parts, self.keys, strict=True):
            record = by_env.get(part.source.env)
            stats = probe_stats(record) if part.plan.probe and record is not None else None
            decision = controller.ingest(step, stats, lag, key)
            decisions.append(decision.model_copy(update={"env": part.source.env}))
        return decisions
