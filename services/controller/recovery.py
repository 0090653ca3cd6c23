"""Rebuild what the controller's store lost from the run's own records (pure).

Redis with ``appendfsync everysec`` may come back from a crash without its last second of writes,
or, without persistence, empty. The run keeps two more copies of every step's decision: the run
directory's ``controller.jsonl`` (the driver logs each step's decisions right after the controller
stored them, one line per step and task source) and, while it lives, the controller's own state
(its last decision). ``rebuild`` merges the three: every copy of a step's decision must agree, and
together they must hold steps 1..n without a gap; the state after step n follows from them
(``schedule.state_at``). Anything else is a ConflictError naming the step, never a guess.

Probe statistics of the rebuilt steps are not put back into the store: nothing the controller
decides reads them, and the run's ``turn_stats.jsonl`` still has them (`turnopd controller replay`).
"""

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from services.contracts.controller import StepDecision
from services.contracts.controller_state import ControllerState
from services.controller import schedule
from services.errors import ConflictError
from services.settings.per_service import ControllerServiceSettings


@dataclass(frozen=True)
class Rebuilt:
    """The store's records made whole: ``decisions`` of steps 1..n and the ``state`` after step n;
    ``held``: the last step the store still had whole (state and decisions; 0: none)."""

    state: ControllerState
    decisions: tuple[StepDecision, ...]
    held: int

    def describe(self, env: str | None) -> str:
        """One line for the run's log: which steps were rebuilt, from what, and what the store held."""
        who = "the controller" if env is None else f"the {env} controller"
        steps = self.state.depth.step
        lost = f"step {steps}" if steps == self.held + 1 else f"steps {self.held + 1}..{steps}"
        return (
            f"Redis had lost {who}'s {lost} (it held step {self.held}); "
            "rebuilt from the run's controller.jsonl and the live controller"
        )


def logged_decisions(text: str, env: str | None) -> list[StepDecision]:
    """The decisions of controller ``env`` (None: the run's only one) in a run's controller.jsonl,
    without their ``env`` (the store keeps none). A last line still being written is left out."""
    complete = text if text.endswith("\n") else text.rpartition("\n")[0]
    decisions = []
    for line in complete.splitlines():
        if not line.strip():
            continue
        decision = StepDecision.model_validate(json.loads(line))
        if decision.env == env:
            decisions.append(decision.model_copy(update={"env": None}))
    return decisions


class DecisionLog:
    """A run's controller.jsonl, read for one controller (``env``; None: the run's only one)."""

    def __init__(self, path: Path, env: str | None) -> None:
        self.path, self.env = path, env

    def decisions(self) -> list[StepDecision]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []  # a run that has logged no step yet
        return logged_decisions(text, self.env)


def _by_step(sources: Iterable[tuple[str, Iterable[StepDecision]]]) -> dict[int, StepDecision]:
    """Every step's decision across ``sources`` (name, decisions); two that differ are a ConflictError."""
    merged: dict[int, tuple[str, StepDecision]] = {}
    for name, decisions in sources:
        for decision in decisions:
            seen = merged.setdefault(decision.step, (name, decision))
            if seen[1] != decision:
                raise ConflictError(
                    f"step {decision.step}'s decision differs between {seen[0]} and {name}: "
                    f"{seen[1].model_dump_json()} vs {decision.model_dump_json()}"
                )
    return {step: decision for step, (_, decision) in merged.items()}


def rebuild(
    stored: ControllerState | None,
    stored_decisions: Sequence[StepDecision],
    logged: Sequence[StepDecision],
    live: ControllerState | None,
    initial: ControllerState,
    settings: ControllerServiceSettings,
) -> Rebuilt | None:
    """The store's records made whole from ``logged`` (the run's controller.jsonl) and ``live`` (the
    running controller's state, None at its start); None when the store lost nothing.

    ``stored``/``stored_decisions``: what the store holds now; ``initial``: the run's state before
    step 1 (its id, method and length).
    """
    for i, decision in enumerate(stored_decisions, start=1):
        if decision.step != i:
            raise ConflictError(f"the store's decision #{i} is for step {decision.step}, not step {i}")
    last = [s.last for s in (stored, live) if s is not None and s.last is not None]
    merged = _by_step(
        [("Redis", stored_decisions), ("controller.jsonl", logged), ("the controller's state", last)]
    )
    n = max([*merged, *(s.depth.step for s in (stored, live) if s is not None)], default=0)
    held = min(stored.depth.step, len(stored_decisions)) if stored is not None else 0
    if held == n:
        return None
    missing = [k for k in range(1, n + 1) if k not in merged]
    if missing:
        raise ConflictError(
            f"cannot rebuild the controller's state at step {n}: the decisions of steps {missing} are "
            "in none of Redis, the run's controller.jsonl and the live controller"
        )
    decisions = tuple(merged[k] for k in range(1, n + 1))
    state = schedule.state_at(initial, decisions, n, settings)
    if live is not None and state != live:
        raise ConflictError(
            f"the state rebuilt from the run's records at step {n} differs from the live controller's"
        )
    return Rebuilt(state=state, decisions=decisions, held=held)
