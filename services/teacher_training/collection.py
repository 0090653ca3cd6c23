"""Collect expert episodes through the env gateway over HTTP: play every step the expert suggests.

Each seed picks one game (`EpisodeCreate.seed`; without a task type, consecutive seeds cycle
through the six task types); the episode is created with ``expert=True``, so every answer carries
the expert's next action, which is played until the game ends. Episodes the expert does not win
within ``max_turns`` steps are dropped and counted.
"""

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from services.contracts.env_gateway import EnvCatalog, EnvName, EpisodeCreate, EpisodeStart, Split, StepResult
from services.contracts.expert_data import ExpertEpisode, ExpertTurn
from services.errors import ConflictError


class ExpertGateway(Protocol):
    """What collection needs of the env gateway (``EnvGatewayClient`` is the real one)."""

    async def envs(self) -> EnvCatalog: ...

    async def create_episode(self, request: EpisodeCreate) -> EpisodeStart: ...

    async def step(self, episode_id: str, action: str) -> StepResult: ...

    async def delete_episode(self, episode_id: str) -> None: ...


@dataclass(frozen=True)
class Collected:
    """The won expert episodes, in seed order, and the seeds that were dropped."""

    episodes: list[ExpertEpisode]
    dropped_seeds: list[int]


def episode_seeds(seed: int, count: int) -> list[int]:
    """The game seeds of a collection: ``count`` consecutive seeds from a block chosen by ``seed``.

    Consecutive seeds walk the task types in turn and then the games, so any ``6 * pool`` of them
    are distinct games.
    """
    first = seed * 1_000_000
    return list(range(first, first + count))


async def play_expert(
    gateway: ExpertGateway, env: EnvName, split: Split, seed: int, max_turns: int
) -> ExpertEpisode | None:
    """One expert episode of the game ``seed`` picks; None when the expert does not win in time."""
    start = await gateway.create_episode(EpisodeCreate(env=env, split=split, seed=seed, expert=True))
    turns: list[ExpertTurn] = []
    try:
        action = start.expert_action
        while action is not None and len(turns) < max_turns:
            result = await gateway.step(start.episode_id, action)
            turns.append(ExpertTurn(action=action, result=result))
            if result.done:
                break
            action = result.expert_action
    finally:
        await gateway.delete_episode(start.episode_id)  # finished or not, the gateway holds it until then
    if not turns or not turns[-1].result.won:
        return None
    return ExpertEpisode(start=start, turns=turns)


async def collect_expert_episodes(
    gateway: ExpertGateway,
    env: EnvName,
    split: Split,
    seeds: Sequence[int],
    max_turns: int,
    concurrency: int,
    on_episode: Callable[[bool], None] | None = None,
) -> Collected:
    """Play the expert on every seed, ``concurrency`` episodes at a time; ``on_episode(won)`` after each."""
    if len(set(seeds)) != len(seeds):
        raise ConflictError("expert seeds must be distinct")
    limit = asyncio.Semaphore(concurrency)

    async def one(seed: int) -> ExpertEpisode | None:
        async with limit:
            episode = await play_expert(gateway, env, split, seed, max_turns)
        if on_episode is not None:
            on_episode(episode is not None)
        return episode

    results = await asyncio.gather(*(one(s) for s in seeds))
    return Collected(
        episodes=[e for e in results if e is not None],
        dropped_seeds=[s for s, e in zip(seeds, results, strict=True) if e is None],
    )
