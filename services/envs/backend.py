"""The env backend interface: a backend picks games and opens sessions; a session is one running
game inside an env worker process. No FastAPI or process handling here."""

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from services.contracts.env_gateway import EnvInfo, EnvName, Split


@dataclass(frozen=True)
class Opening:
    """A new episode's first view."""

    observation: str
    objective: str
    admissible_actions: list[str]
    task_type: str
    game_id: str
    expert_action: str | None


@dataclass(frozen=True)
class Outcome:
    """The game's answer to one action."""

    observation: str
    reward: float
    done: bool
    won: bool
    admissible_actions: list[str]
    expert_action: str | None


@dataclass(frozen=True)
class GameChoice:
    """Which game a seed selects."""

    task_type: str
    index: int


class GameSession(ABC):
    """One running game; not thread-safe (engines keep global state), used by one worker thread."""

    @abstractmethod
    def start(self) -> Opening:
        """Reset the game and return its opening."""

    @abstractmethod
    def step(self, action: str) -> Outcome:
        """Play one admissible action (validated by the gateway)."""

    @abstractmethod
    def close(self) -> None:
        """Release the engine."""


class EnvBackend(ABC):
    """Games of one kind: catalog, deterministic game choice, and sessions."""

    name: ClassVar[EnvName]

    @abstractmethod
    def task_types(self) -> list[str]:
        """Task types accepted in EpisodeCreate.task_type."""

    @abstractmethod
    def pool_size(self, split: Split, task_type: str) -> int:
        """Number of games of a split and task type."""

    @abstractmethod
    def info(self) -> EnvInfo:
        """Catalog entry for /v1/envs."""

    @abstractmethod
    def game_path(self, split: Split, choice: GameChoice) -> Path:
        """The chosen game's file, generated into the cache first if it is not there yet."""

    @abstractmethod
    def open(self, split: Split, choice: GameChoice, expert: bool) -> GameSession:
        """Load the chosen game (generating it into the cache first if needed)."""

    def choose(self, split: Split, seed: int, task_type: str | None) -> GameChoice:
        """Seed -> game: without a task type the seed also spreads games evenly over the types."""
        types = self.task_types()
        if task_type is None:
            chosen, rest = types[seed % len(types)], seed // len(types)
        elif task_type in types:
            chosen, rest = task_type, seed
        else:
            raise ValueError(f"unknown task_type {task_type!r} for env {self.name!r}; known: {types}")
        return GameChoice(chosen, rest % self.pool_size(split, chosen))


def admissible_without(commands: Sequence[str], hidden: frozenset[str]) -> list[str]:
    """Sorted admissible commands minus meta commands the agent should not spend turns on."""
    return sorted(c for c in set(commands) if c not in hidden)
