"""Pre-generating the game pools into the cache (`turnopd envs build`), and checking that the
expert wins them. Functions here take settings as JSON so they can run in worker processes, and
the run's service token, which backends send to their remote servers (retrieval, webshop)."""

from dataclasses import dataclass
from functools import lru_cache

from services.contracts.env_gateway import EnvName, Split
from services.env_gateway.backend_factory import make_backend
from services.envs.backend import EnvBackend, GameChoice
from services.settings.env_gateway import EnvGatewaySettings

_MAX_EXPERT_TURNS = 200


@dataclass(frozen=True)
class GameRef:
    """One game of a pool."""

    env: EnvName
    split: Split
    task_type: str
    index: int

    def label(self) -> str:
        return f"{self.env}/{self.split}/{self.task_type}/{self.index:05d}"


@dataclass(frozen=True)
class ExpertRun:
    game: GameRef
    won: bool
    turns: int


def pool_games(
    settings: EnvGatewaySettings,
    envs: list[EnvName],
    splits: list[Split],
    task_types: list[str] | None,
    service_token: str | None,
) -> list[GameRef]:
    """Every game of the selected pools (all task types of each env unless ``task_types`` is given)."""
    games = []
    for env in envs:
        backend = make_backend(env, settings, service_token=service_token)
        for split in splits:
            for task_type in backend.task_types():
                if task_types is not None and task_type not in task_types:
                    continue
                size = backend.pool_size(split, task_type)
                games += [GameRef(env, split, task_type, i) for i in range(size)]
    return games


@lru_cache(maxsize=4)
def _backend(settings_json: str, env: EnvName, service_token: str | None) -> EnvBackend:
    # One backend per process and settings: engines are reused from game to game.
    settings = EnvGatewaySettings.model_validate_json(settings_json)
    return make_backend(env, settings, service_token=service_token)


def build_game(settings_json: str, game: GameRef, service_token: str | None) -> GameRef:
    """Make sure ``game`` is in the cache (generating it if needed)."""
    backend = _backend(settings_json, game.env, service_token)
    backend.game_path(game.split, GameChoice(game.task_type, game.index))
    return game


def run_expert(settings_json: str, game: GameRef, service_token: str | None) -> ExpertRun:
    """Play ``game`` in-process with the expert's actions only; did it win, in how many turns?"""
    session = _backend(settings_json, game.env, service_token).open(
        game.split, GameChoice(game.task_type, game.index), expert=True
    )
    try:
        opening = session.start()
        action, turns, won = opening.expert_action, 0, False
        while action is not None and turns < _MAX_EXPERT_TURNS:
            outcome = session.step(action)
            turns += 1
            if outcome.done:
                won = outcome.won
                break
            action = outcome.expert_action
        return ExpertRun(game, won, turns)
    finally:
        session.close()
