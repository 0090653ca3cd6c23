"""Full-depth and truncated steps of each run (pure): what a step costs at each depth.

A run's steps are either full depth, played to its largest ``H_roll`` (the turn cap: vanilla's
every step, TurnOPD's probes), or truncated below it (TurnOPD's other steps). The metrics'
``probe`` flag does not tell them apart: vanilla keeps the controller's probe schedule in its logs
while it plays every step to the cap. Their mean seconds, turns and tokens
say how much truncation saves per step: where episodes end well before the turn cap, a truncated
step plays nearly what a full one does, and TurnOPD's time advantage is capped by that, whatever
the controller's settings. Over ``k`` steps of which ``f`` are full depth, TurnOPD's steps cost
``f + (k - f) * r`` full steps, ``r`` the truncated over the full step's seconds.
"""

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from services.contracts.experiments import ComparisonSummary
from services.contracts.orchestrator import StepMetrics
from services.experiments.tables import Table


@dataclass(frozen=True)
class StepKind:
    steps: int
    mean_s: float
    mean_turns: float  # per episode
    mean_tokens: float  # trained tokens per step


@dataclass(frozen=True)
class StepKinds:
    full: StepKind | None  # None: the run has no step of this kind
    truncated: StepKind | None

    @property
    def truncated_over_full(self) -> float | None:
        """A truncated step's mean seconds over a full-depth one's (None: one kind is missing)."""
        if self.full is None or self.truncated is None or self.full.mean_s <= 0.0:
            return None
        return self.truncated.mean_s / self.full.mean_s


# (method, seed) -> the run's steps by kind
RunStepKinds = Mapping[tuple[str, int], StepKinds]


def _kind(metrics: Sequence[StepMetrics]) -> StepKind | None:
    if not metrics:
        return None
    return StepKind(
        steps=len(metrics),
        mean_s=statistics.fmean(m.times.total_s for m in metrics),
        mean_turns=statistics.fmean(m.mean_turns for m in metrics),
        mean_tokens=statistics.fmean(m.tokens for m in metrics),
    )


def step_kinds(metrics: Sequence[StepMetrics]) -> StepKinds:
    """The run's full-depth steps (``H_roll`` at the run's largest) and truncated ones, each kind's means."""
    cap = max((m.h_roll for m in metrics), default=0)
    return StepKinds(
        full=_kind([m for m in metrics if m.h_roll == cap]),
        truncated=_kind([m for m in metrics if m.h_roll < cap]),
    )


def _cells(kind: StepKind | None) -> list[str]:
    if kind is None:
        return ["0", "-", "-", "-"]
    return [str(kind.steps), f"{kind.mean_s:.1f}", f"{kind.mean_turns:.1f}", f"{kind.mean_tokens:,.0f}"]


def step_kinds_table(summary: ComparisonSummary, kinds: RunStepKinds) -> Table:
    """One row per run (the summary's order): each kind's steps, mean seconds, turns and tokens."""
    body = []
    for name, method in summary.methods.items():
        for score in method.runs:
            run = kinds[name, score.seed]
            ratio = run.truncated_over_full
            body.append(
                [
                    f"{name} seed {score.seed}",
                    *_cells(run.full),
                    *_cells(run.truncated),
                    "-" if ratio is None else f"{ratio:.2f}",
                ]
            )
    return Table(
        title="Full-depth and truncated steps",
        header=[
            "Run",
            "Full-depth steps",
            "s",
            "Turns",
            "Tokens",
            "Truncated steps",
            "s",
            "Turns",
            "Tokens",
            "Truncated s / full s",
        ],
        rows=body,
        note="Means per step of each kind: seconds, turns per episode, trained tokens. Full depth: "
        "vanilla's every step and TurnOPD's probes; truncated: TurnOPD's steps at H_roll. Over k steps "
        "of which f are full depth, TurnOPD's steps cost f + (k - f) x (truncated s / full s) full steps.",
    )


def step_kinds_json(kinds: RunStepKinds) -> list[dict[str, Any]]:
    return [
        {
            "method": method,
            "seed": seed,
            "full": None if k.full is None else asdict(k.full),
            "truncated": None if k.truncated is None else asdict(k.truncated),
            "truncated_over_full": k.truncated_over_full,
        }
        for (method, seed), k in kinds.items()
    ]
