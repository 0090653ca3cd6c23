"""Collect expert episodes through the env gateway over HTTP: play every step the expert suggests.

Each seed picks one game (`EpisodeCreate.seed`; without a task type, consecutive seeds cycle
through the six task types); the episode is created with ``expert=True``, so every answer carries
the expert's next action, which is played until the game ends. Episodes the expert does not win
within ``max_turns`` steps are dropped and counted. Optional random detours (``detour_rate``)
turn episodes into recovery demonstrations. An episode the gateway lost (its env worker process
died and was replaced: HTTP 410) is played again from its start, as a rollout's is, instead of
ending the collection.
"""

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from services.contracts.env_gateway import EnvCatalog, EnvName, EpisodeCreate, EpisodeStart, Split, StepResult
from services.contracts.expert_data import ExpertEpisode, ExpertTurn
from services.env_gateway.episode_errors import EpisodeLostError
from services.errors import ConflictError

LOST_EPISODE_TRIES = 3  # plays of one seed whose episode the gateway lost, before the collection fails


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


def detour_action(expert_action: str, admissible: Sequence[str], rng: random.Random) -> str | None:
    """A random admissible action other than the expert's (never a ``put``, which may end the game)."""
    choices = [a for a in admissible if a != expert_action and not a.startswith("put ")]
    return rng.choice(choices) if choices else None


async def play_expert(
    gateway: ExpertGateway,
    env: EnvName,
    split: Split,
    seed: int,
    max_turns: int,
    detour_rate: float = 0.0,
) -> ExpertEpisode | None:
    """One expert episode of the game ``seed`` picks; None when the expert does not win in time.

    With ``detour_rate`` > 0, before each expert action a random detour is played with that chance
    (seeded by ``seed``); the expert then plays on from wherever the detour led, so the episode
    demonstrates recovering from a wrong step.
    """
    rng = random.Random(seed)
    start = await gateway.create_episode(EpisodeCreate(env=env, split=split, seed=seed, expert=True))
    turns: list[ExpertTurn] = []
    try:
        action, admissible = start.expert_action, start.admissible_actions
        while action is not None and len(turns) < max_turns:
            detour = detour_action(action, admissible, rng) if rng.random() < detour_rate else None
            played = detour or action
            result = await gateway.step(start.episode_id, played)
            turns.append(ExpertTurn(action=played, result=result, detour=detour is not None))
            if result.done:
                break
            action, admissible = result.expert_action, result.admissible_actions
    finally:
        await gateway.delete_episode(start.episode_id)  # finished or not, the gateway holds it until then
    if not turns or not turns[-1].result.won or turns[-1].detour:
        return None
    return ExpertEpisode(start=start, turns=turns)


async def again_if_lost(
    play: Callable[[], Awaitable[ExpertEpisode | None]], what: str
) -> ExpertEpisode | None:
    """``play()``, called again when the gateway lost its episode (a new play from the start); the
    ``LOST_EPISODE_TRIES``-th loss is raised, naming ``what`` was lost."""
    losses = 0
    while True:
        try:
            return await play()
        except EpisodeLostError as lost:
            losses += 1
            if losses == LOST_EPISODE_TRIES:
                raise EpisodeLostError(
                    f"the expert episode of {what} was lost {losses} times (its env worker process "
                    f"died each time); the last: {lost}"
                ) from lost


async def collect_expert_episodes(
    gateway: ExpertGateway,
    env: EnvName,
    split: Split,
    seeds: Sequence[int],
    max_turns: int,
    concurrency: int,
    on_episode: Callable[[bool], None] | None = None,
    detour_rate: float = 0.0,
) -> Collected:
    """Play the expert on every seed, ``concurrency`` episodes at a time; ``on_episode(won)`` after each."""
    if len(set(seeds)) != len(seeds):
        raise ConflictError("expert seeds must be distinct")
    limit = asyncio.Semaphore(concurrency)

    async def one(seed: int) -> ExpertEpisode | None:
        async with limit:
            # the same seed plays the same game and the same detours again
            episode = await again_if_lost(
                lambda: play_expert(gateway, env, split, seed, max_turns, detour_rate), f"{env} seed {seed}"
            )
        if on_episode is not None:
            on_episode(episode is not None)
        return episode

    results = await asyncio.gather(*(one(s) for s in seeds))
    return Collected(
        episodes=[e for e in results if e is not None],
        dropped_seeds=[s for s, e in zip(seeds, results, strict=True) if e is None],
    )
