"""The `textworld` backend: games made offline by TextWorld's own challenge generators (`tw-make`),
compiled once into the cache and replayed; the expert is TextWorld's walkthrough policy
(`policy_commands`, re-planned from the current state after every step)."""

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from services.contracts.env_gateway import EnvInfo, Split
from services.envs.backend import EnvBackend, GameChoice, GameSession, Opening, Outcome
from services.envs.game_cache import ensure_file
from services.envs.textworld.settings import TextWorldGenSettings

SPLITS: tuple[Split, ...] = ("train", "valid_unseen")
GENERATOR_VERSION = 1
# Seeds of the held-out split start far from the train seeds, so the two never share a game.
_VALID_SEED_OFFSET = 1_000_000
_HIDDEN_COMMANDS = frozenset({"help"})
_LETTER = re.compile(r"[A-Za-z]")
# The interpreter's prompt line, with the status bar ('>   -= Kitchen =-2/8') after it.
_PROMPT_LINE = re.compile(r"^>.*$", re.MULTILINE)
_BLANK_RUNS = re.compile(r"\n\s*\n+")


def challenge_settings(challenge: str, split: Split, seed: int, tw: TextWorldGenSettings) -> dict[str, Any]:
    """`tw-make` settings of a challenge; the split picks TextWorld's own train/held-out variants."""
    held_out = split == "valid_unseen"
    match challenge:
        case "tw-simple":
            return {"rewards": "balanced", "goal": "detailed", "test": held_out}
        case "tw-cooking":
            return {
                "recipe": tw.cooking_recipe,
                "take": tw.cooking_recipe,
                "go": tw.cooking_go,
                "open": True,
                "cook": False,
                "cut": False,
                "drop": False,
                "recipe_seed": seed,
                "split": "valid" if held_out else "train",
            }
        case "tw-treasure_hunter":
            return {"level": tw.treasure_hunter_level}
        case _:
            raise ValueError(f"unknown TextWorld challenge {challenge!r}")


def game_seed(split: Split, index: int) -> int:
    return index + (_VALID_SEED_OFFSET if split == "valid_unseen" else 0)


def compile_challenge_game(
    challenge: str, split: Split, index: int, tw: TextWorldGenSettings, target: Path
) -> None:
    """Generate and compile one game to ``target`` (.z8, with its .json next to it), atomically."""
    from textworld import GameOptions
    from textworld.challenges import CHALLENGES
    from textworld.generator import compile_game

    seed = game_seed(split, index)
    target.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
    try:
        options = GameOptions()
        options.seeds = seed
        options.path = str(workdir / target.name)
        options.force_recompile = True
        game = CHALLENGES[challenge][1](challenge_settings(challenge, split, seed, tw), options)
        compiled = Path(compile_game(game, options))
        # The .json (game logic, needed for admissible commands and the walkthrough) goes first:
        # the .z8 is the marker that the game exists.
        os.replace(compiled.with_suffix(".json"), target.with_suffix(".json"))
        os.replace(compiled, target)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def clean_text(text: str) -> str:
    """Game text without the interpreter's prompt/status line and runs of blank lines."""
    return _BLANK_RUNS.sub("\n\n", _PROMPT_LINE.sub("", text)).strip()


def strip_banner(text: str) -> str:
    """Drop TextWorld's ASCII-art banner (leading lines without a letter) from the opening text."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _LETTER.search(line)), len(lines))
    return clean_text("\n".join(lines[start:]))


class TextWorldBackend(EnvBackend):
    name = "textworld"

    def __init__(self, tw: TextWorldGenSettings, cache_dir: Path) -> None:
        self._tw = tw
        self._pool = {"train": tw.games_per_challenge_train, "valid_unseen": tw.games_per_challenge_valid}
        key = f"v{GENERATOR_VERSION}-th{tw.treasure_hunter_level}-cr{tw.cooking_recipe}-cg{tw.cooking_go}"
        self._cache_dir = cache_dir / "textworld" / key

    def task_types(self) -> list[str]:
        return list(self._tw.challenges)

    def pool_size(self, split: Split, task_type: str) -> int:
        return self._pool[split]

    def info(self) -> EnvInfo:
        counts = {s: self._pool[s] * len(self._tw.challenges) for s in SPLITS}
        return EnvInfo(
            name="textworld",
            splits=list(SPLITS),
            task_types=self.task_types(),
            source="generated offline (tw-make)",
            games_per_split=counts,
        )

    def game_path(self, split: Split, choice: GameChoice) -> Path:
        path = self._cache_dir / split / choice.task_type / f"{choice.index:05d}.z8"

        def build(target: Path) -> None:
            compile_challenge_game(choice.task_type, split, choice.index, self._tw, target)

        return ensure_file(path, build)[0]

    def open(self, split: Split, choice: GameChoice, expert: bool) -> GameSession:
        path = self.game_path(split, choice)
        return TextWorldSession(
            path, choice.task_type, f"{split}/{choice.task_type}/{choice.index:05d}", expert
        )


class TextWorldSession(GameSession):
    def __init__(self, path: Path, task_type: str, gid: str, expert: bool) -> None:
        import textworld

        infos = textworld.EnvInfos(
            admissible_commands=True, policy_commands=expert, won=True, lost=True, objective=True
        )
        self._env: Any = textworld.start(str(path), request_infos=infos)
        self._task_type = task_type
        self._game_id = gid
        self._expert = expert

    def start(self) -> Opening:
        state = self._env.reset()
        admissible = sorted(set(state["admissible_commands"]) - _HIDDEN_COMMANDS)
        return Opening(
            strip_banner(str(state.feedback)),
            str(state["objective"] or "").strip(),
            admissible,
            self._task_type,
            self._game_id,
            self._expert_action(state),
        )

    def step(self, action: str) -> Outcome:
        state, _, done = self._env.step(action)
        won = bool(state["won"])
        admissible = sorted(set(state["admissible_commands"] or []) - _HIDDEN_COMMANDS)
        expert_action = None if done else self._expert_action(state)
        return Outcome(
            clean_text(str(state.feedback)), 1.0 if won else 0.0, bool(done), won, admissible, expert_action
        )

    def _expert_action(self, state: Any) -> str | None:
        if not self._expert:
            return None
        plan = state["policy_commands"] or []
        return str(plan[0]) if plan else None

    def close(self) -> None:
        self._env.close()
