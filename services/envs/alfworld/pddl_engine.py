"""TextWorld's PDDL engine (`PddlEnv` + Fast Downward) showing ALFWorld's entity names.

Each `PddlEnv` loads its own copy of Fast Downward's shared library (its state is global to the
library), so engines are kept and reused across episodes instead of being made per episode. They
are never unloaded: loading a fresh copy after `fast_downward.close_lib` crashes the process
(checked with textworld 1.7), so a worker holds as many engines as its peak of open episodes.
"""

from collections.abc import Callable
from typing import Any

from textworld.core import EnvInfos
from textworld.envs.pddl import PddlEnv
from textworld.generator.game import EntityInfo

Naming = Callable[[list[str]], dict[str, str]]  # PDDL ids -> displayed names (ids not named keep theirs)


class _NamedPddlEnv(PddlEnv):
    naming: Naming | None = None

    def _get_entity_infos(self) -> dict[str, EntityInfo]:
        infos: dict[str, EntityInfo] = super()._get_entity_infos()
        if self.naming is not None:
            for entity_id, name in self.naming(sorted(infos)).items():
                infos[entity_id].name = name
        return infos


class PddlEngine:
    """One reusable game engine: load a `.tw-pddl` game, reset, step."""

    def __init__(self) -> None:
        self._env = _NamedPddlEnv(EnvInfos(admissible_commands=True, won=True, feedback=True))

    def load(self, game: dict[str, Any], naming: Naming) -> None:
        self._env.naming = naming
        self._env.load(game)

    def reset(self) -> tuple[str, list[str]]:
        """Opening text and admissible commands."""
        state = self._env.reset()
        return str(state.feedback), list(state["admissible_commands"])

    def step(self, command: str) -> tuple[str, bool, list[str]]:
        """Feedback, won, admissible commands after ``command``."""
        state, _, _ = self._env.step(command)
        return str(state.feedback), bool(state["won"]), list(state["admissible_commands"])
