"""Expert collection glue: the expert's suggestions are played, losers dropped, every episode deleted.

A small in-memory gateway stands in for the server (glue only; the integration test collects
from a real gateway over HTTP).
"""

import asyncio

import pytest
from expert_episodes import SCRIPT, scripted_episode

from services.contracts.env_gateway import EnvCatalog, EpisodeCreate, EpisodeStart, StepResult
from services.env_gateway.episode_errors import EpisodeLostError
from services.errors import ConflictError
from services.teacher_training.collection import (
    LOST_EPISODE_TRIES,
    collect_expert_episodes,
    episode_seeds,
    play_expert,
)

STUCK_SEED = 3  # the expert of this game gives up (suggests nothing) after one step


class ScriptedGateway:
    """Every seed plays SCRIPT; STUCK_SEED's expert stops suggesting after the first step."""

    def __init__(self) -> None:
        self.created: list[EpisodeCreate] = []
        self.played: dict[str, list[str]] = {}
        self.deleted: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def envs(self) -> EnvCatalog:
        return EnvCatalog(envs=[])

    async def create_episode(self, request: EpisodeCreate) -> EpisodeStart:
        self.created.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0)
        start = scripted_episode(seed=request.seed or 0).start
        self.played[start.episode_id] = []
        return start

    async def step(self, episode_id: str, action: str) -> StepResult:
        await asyncio.sleep(0)
        self.played[episode_id].append(action)
        turn = len(self.played[episode_id])
        result = scripted_episode(seed=0).turns[turn - 1].result
        if episode_id == f"ep{STUCK_SEED}":
            return result.model_copy(update={"expert_action": None})
        return result

    async def delete_episode(self, episode_id: str) -> None:
        self.deleted.append(episode_id)
        self.in_flight -= 1


def test_episode_seeds_are_consecutive_in_a_block_chosen_by_the_seed():
    assert episode_seeds(0, 3) == [0, 1, 2]
    assert episode_seeds(2, 2) == [2_000_000, 2_000_001]


def test_play_expert_follows_every_suggestion_to_the_win():
    gateway = ScriptedGateway()
    episode = asyncio.run(play_expert(gateway, "alfworld", "train", seed=5, max_turns=60))
    assert episode is not None and episode.won
    assert [t.action for t in episode.turns] == [a for a, _, _ in SCRIPT]
    assert gateway.played["ep5"] == [a for a, _, _ in SCRIPT]
    assert gateway.created == [EpisodeCreate(env="alfworld", split="train", seed=5, expert=True)]
    assert gateway.deleted == ["ep5"]


def test_play_expert_drops_episodes_past_the_turn_limit_or_without_a_suggestion():
    gateway = ScriptedGateway()
    assert asyncio.run(play_expert(gateway, "alfworld", "train", seed=1, max_turns=2)) is None
    assert gateway.played["ep1"] == [SCRIPT[0][0], SCRIPT[1][0]]
    assert asyncio.run(play_expert(gateway, "alfworld", "train", seed=STUCK_SEED, max_turns=60)) is None
    assert gateway.deleted == ["ep1", f"ep{STUCK_SEED}"]


def test_collect_keeps_seed_order_counts_drops_and_bounds_concurrency():
    gateway = ScriptedGateway()
    outcomes: list[bool] = []
    collected = asyncio.run(
        collect_expert_episodes(
            gateway, "alfworld", "train", [0, 1, 2, 3, 4, 5], 60, concurrency=2, on_episode=outcomes.append
        )
    )
    assert [e.start.seed for e in collected.episodes] == [0, 1, 2, 4, 5]
    assert collected.dropped_seeds == [STUCK_SEED]
    assert sorted(outcomes) == [False, True, True, True, True, True]
    assert gateway.max_in_flight == 2
    assert sorted(gateway.deleted) == [f"ep{s}" for s in range(6)]


def test_collect_refuses_repeated_seeds():
    with pytest.raises(ConflictError, match="distinct"):
        asyncio.run(collect_expert_episodes(ScriptedGateway(), "alfworld", "train", [1, 1], 60, 2))


class LosingGateway(ScriptedGateway):
    """ScriptedGateway whose env worker dies under the first ``losses`` plays of ``seed``, at turn 2."""

    def __init__(self, seed: int, losses: int) -> None:
        super().__init__()
        self.seed, self.losses = seed, losses

    async def step(self, episode_id: str, action: str) -> StepResult:
        if episode_id == f"ep{self.seed}" and self.losses and len(self.played[episode_id]) == 1:
            self.losses -= 1
            raise EpisodeLostError(f"episode {episode_id} is gone: its env worker process died")
        return await super().step(episode_id, action)


def test_an_episode_the_gateway_lost_is_played_again_from_its_start():
    """Before, one env worker's death ended a whole collection (20 minutes of it, for 2,400 games)."""
    gateway = LosingGateway(seed=2, losses=LOST_EPISODE_TRIES - 1)
    collected = asyncio.run(
        collect_expert_episodes(gateway, "alfworld", "train", [0, 1, 2], 60, concurrency=2)
    )
    assert [e.start.seed for e in collected.episodes] == [0, 1, 2] and collected.dropped_seeds == []
    [replayed] = [e for e in collected.episodes if e.start.seed == 2]
    assert [t.action for t in replayed.turns] == [a for a, _, _ in SCRIPT]  # the last play, whole
    again = EpisodeCreate(env="alfworld", split="train", seed=2, expert=True)
    assert gateway.created.count(again) == LOST_EPISODE_TRIES  # the same game each time
    assert sorted(gateway.deleted) == ["ep0", "ep1"] + ["ep2"] * LOST_EPISODE_TRIES  # lost ones too


def test_an_episode_lost_on_every_try_ends_the_collection_naming_its_seed():
    gateway = LosingGateway(seed=1, losses=LOST_EPISODE_TRIES)
    with pytest.raises(EpisodeLostError, match=f"alfworld seed 1 was lost {LOST_EPISODE_TRIES} times"):
        asyncio.run(collect_expert_episodes(gateway, "alfworld", "train", [0, 1], 60, concurrency=1))
    assert (
        gateway.created.count(EpisodeCreate(env="alfworld", split="train", seed=1, expert=True))
        == LOST_EPISODE_TRIES
    )
