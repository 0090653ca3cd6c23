"""The `alfworld` backend: household games played through TextWorld's PDDL engine.

With real ALFWorld game files (``$ALFWORLD_DATA`` or ``env_gateway.alfworld_data``) it serves
them; otherwise it generates games offline from ALFWorld's domain, grammar and scene layouts
(`services.envs.alfworld`), cached on disk. The expert reads only observations.
"""

import json
import re
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES, EnvInfo, Split
from services.envs.alfworld.expert import HouseholdExpert
from services.envs.alfworld.generator import GenerationParams, game_id, make_game
from services.envs.alfworld.grammar import with_put_wording
from services.envs.alfworld.pddl_engine import Naming, PddlEngine
from services.envs.alfworld.settings import HouseholdGenSettings
from services.envs.alfworld.tasks import TASK_TYPE_BY_ALFRED_NAME
from services.envs.alfworld.world import display_name
from services.envs.backend import EnvBackend, GameChoice, GameSession, Opening, Outcome
from services.envs.game_cache import atomic_write_text, ensure_file
from services.errors import ConfigError, InputError

SPLITS: tuple[Split, ...] = ("train", "valid_unseen")
_HIDDEN_COMMANDS = frozenset({"help"})
_OBJECTIVE = re.compile(r"Your task is to: (.*)")
_GENERATED_ID = re.compile(r"^[a-z]+_\d+$")
_UNSOLVABLE = re.compile(r'"solvable"\s*:\s*false')


def generated_naming(entity_ids: list[str]) -> dict[str, str]:
    """Names of generated games: 'apple_02' -> 'apple 2' (types and the agent keep their ids)."""
    return {i: display_name(i) for i in entity_ids if _GENERATED_ID.match(i) and not i.startswith("loc_")}


def alfred_naming(entity_ids: list[str]) -> dict[str, str]:
    """Names of real ALFWorld games, numbered by ALFWorld's own demangler."""
    from alfworld.agents.utils.misc import Demangler

    ids = [i for i in entity_ids if "_bar_" in i]
    demangler = Demangler(game_infos={i: _IdOnly(i) for i in ids})
    return {i: str(demangler.demangle_alfred_name(i)).strip() for i in ids}


class _IdOnly:
    def __init__(self, entity_id: str) -> None:
        self.id = entity_id


class AlfworldBackend(EnvBackend):
    name = "alfworld"

    def __init__(self, gen: HouseholdGenSettings, cache_dir: Path, data_dir: Path | None) -> None:
        """``data_dir``: real ALFWorld game files; None generates household games into ``cache_dir``."""
        self._params = GenerationParams(gen.max_receptacles, gen.max_distractors, gen.max_targets)
        self._pool = {"train": gen.games_per_task_type_train, "valid_unseen": gen.games_per_task_type_valid}
        self._cache_dir = cache_dir / "alfworld" / self._params.cache_key()
        self._data_dir = data_dir
        self._idle_engines: list[PddlEngine] = []

    def task_types(self) -> list[str]:
        return list(HOUSEHOLD_TASK_TYPES)

    def pool_size(self, split: Split, task_type: str) -> int:
        if self._data_dir is None:
            return self._pool[split]
        games = self._real_games.get((split, task_type), [])
        if not games:
            raise InputError(
                f"no ALFWorld games of task type {task_type!r} in split {split!r} under {self._data_dir}"
            )
        return len(games)

    def info(self) -> EnvInfo:
        counts = {s: sum(self._count(s, t) for t in self.task_types()) for s in SPLITS}
        source = (
            f"ALFWorld data at {self._data_dir}" if self._data_dir else "generated offline (ALFWorld PDDL)"
        )
        return EnvInfo(
            name="alfworld",
            splits=list(SPLITS),
            task_types=self.task_types(),
            source=source,
            games_per_split=counts,
        )

    def _count(self, split: Split, task_type: str) -> int:
        if self._data_dir is None:
            return self._pool[split]
        return len(self._real_games.get((split, task_type), []))

    def game_path(self, split: Split, choice: GameChoice) -> Path:
        """The game file of a choice (generated into the cache on first use)."""
        if self._data_dir is not None:
            return self._real_games[(split, choice.task_type)][choice.index]
        path = self._cache_dir / split / choice.task_type / f"{choice.index:05d}.tw-pddl"

        def build(target: Path) -> None:
            game = make_game(split, choice.task_type, choice.index, self._params)
            atomic_write_text(target, json.dumps(game))

        return ensure_file(path, build)[0]

    def open(self, split: Split, choice: GameChoice, expert: bool) -> GameSession:
        path = self.game_path(split, choice)
        try:
            game: dict[str, Any] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read game file {path}: {exc}") from None
        if self._data_dir is None:
            naming: Naming = generated_naming
            gid = game_id(split, choice.task_type, choice.index)
        else:
            game["grammar"] = with_put_wording(game["grammar"])
            naming = alfred_naming
            gid = str(path.parent.relative_to(self._data_dir))
        engine = self._idle_engines.pop() if self._idle_engines else PddlEngine()
        engine.load(game, naming)
        return HouseholdSession(engine, choice.task_type, gid, expert, release=self._give_back)

    def _give_back(self, engine: PddlEngine) -> None:
        self._idle_engines.append(engine)

    @cached_property
    def _real_games(self) -> dict[tuple[str, str], list[Path]]:
        """ALFWorld's layout: <data>/json_2.1.1/<split>/<task>-<obj>-...-<scene>/<trial>/game.tw-pddl."""
        assert self._data_dir is not None
        root = self._data_dir / "json_2.1.1" if (self._data_dir / "json_2.1.1").is_dir() else self._data_dir
        games: dict[tuple[str, str], list[Path]] = {}
        for split in SPLITS:
            for path in sorted((root / split).glob("*/*/game.tw-pddl")):
                task_dir = path.parent.parent.name
                # ALFWorld's TextWorld env skips these too: movable-receptacle and sliced-object
                # tasks, and games its generator marked unsolvable.
                if "movable" in task_dir or "Sliced" in task_dir or _UNSOLVABLE.search(path.read_text()):
                    continue
                task_type = TASK_TYPE_BY_ALFRED_NAME.get(task_dir.split("-", 1)[0])
                if task_type is not None:
                    games.setdefault((split, task_type), []).append(path)
        if not games:
            raise ConfigError(f"no ALFWorld games (*/*/game.tw-pddl) under {root}/{{train,valid_unseen}}")
        return games


class HouseholdSession(GameSession):
    def __init__(
        self,
        engine: PddlEngine,
        task_type: str,
        gid: str,
        expert: bool,
        release: Callable[[PddlEngine], None],
    ) -> None:
        self._engine: PddlEngine | None = engine
        self._task_type = task_type
        self._game_id = gid
        self._with_expert = expert
        self._expert: HouseholdExpert | None = None
        self._release = release

    def _live(self) -> PddlEngine:
        if self._engine is None:
            raise RuntimeError("session is closed")
        return self._engine

    def start(self) -> Opening:
        intro, commands = self._live().reset()
        admissible = sorted(set(commands) - _HIDDEN_COMMANDS)
        match = _OBJECTIVE.search(intro)
        objective = match.group(1).strip() if match else ""
        self._expert = HouseholdExpert(objective, intro) if self._with_expert else None
        return Opening(
            intro, objective, admissible, self._task_type, self._game_id, self._expert_action(admissible)
        )

    def step(self, action: str) -> Outcome:
        feedback, won, commands = self._live().step(action)
        admissible = sorted(set(commands) - _HIDDEN_COMMANDS)
        if self._expert is not None:
            self._expert.observe(action, feedback)
        expert_action = None if won else self._expert_action(admissible)
        return Outcome(feedback, 1.0 if won else 0.0, won, won, admissible, expert_action)

    def _expert_action(self, admissible: list[str]) -> str | None:
        return self._expert.next_action(admissible) if self._expert is not None else None

    def close(self) -> None:
        if self._engine is not None:
            engine, self._engine = self._engine, None
            self._release(engine)
