"""The agent loop's glue: turns, spans, feedback, truncation, failures and seeding.

The env is a small in-memory game implementing the client's three methods (a fake only for the
loop's glue; tests/integration/test_rollout_gateway.py plays the real gateway). Generation is the
real tiny zoo student, or a scripted engine where a test needs chosen responses.
"""

import asyncio
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx
import pytest

from services.agent.chat_format import ChatFormat
from services.agent.tool_calls import format_response
from services.contracts.env_gateway import EpisodeCreate, EpisodeStart, StepResult
from services.contracts.rollout import EpisodeTask
from services.contracts.trajectory import Trajectory
from services.env_gateway.episode_errors import EngineError, EpisodeLostError
from services.errors import InputError, NotFoundError
from services.models.loading import load_tokenizer
from services.rollout_worker.agent_loop import failure_reason, play_episode_outcomes, play_episodes
from services.rollout_worker.engines import Generation, GenerationEngine, GenerationParams, make_engine
from services.rollout_worker.episode_text import first_user_message

ADMISSIBLE = ["go to a", "go to b", "look"]
LOST_SEED = 13  # stepping this game loses the episode (as when an env worker dies)
BROKEN_SEED = 77  # creating this game fails
CRASH_SEED = 31  # the game raises on a step (the environment's own failure)


class FakeGateway:
    """Game N: 'go to b' wins; a step of game LOST_SEED raises EpisodeLostError, of CRASH_SEED EngineError."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str]] = []
        self.deleted: list[str] = []
        self.created: list[str] = []

    async def create_episode(self, request: EpisodeCreate) -> EpisodeStart:
        if request.seed == BROKEN_SEED:
            raise EngineError("the game engine failed to load the game")
        episode_id = f"ep-{request.seed}-{len(self.created)}"
        self.created.append(episode_id)
        return EpisodeStart(
            episode_id=episode_id,
            observation=f"Game {request.seed}. You are in a room.\n\nYour task is to: go to b.",
            objective="go to b.",
            admissible_actions=ADMISSIBLE,
            task_type=request.task_type or "pick_and_place",
            game_id=f"{request.split}/pick_and_place/{request.seed}",
            seed=request.seed or 0,
        )

    async def step(self, episode_id: str, action: str) -> StepResult:
        await asyncio.sleep(0)
        if episode_id.startswith(f"ep-{LOST_SEED}-"):
            raise EpisodeLostError("env worker died")
        if episode_id.startswith(f"ep-{CRASH_SEED}-"):
            raise EngineError("env gateway answered HTTP 500: the game raised on 'go to a'")
        self.steps.append((episode_id, action))
        turn = sum(1 for e, _ in self.steps if e == episode_id)
        won = action == "go to b"
        return StepResult(
            observation="You arrive at b." if won else f"You did {action}.",
            reward=1.0 if won else 0.0,
            done=won,
            won=won,
            admissible_actions=ADMISSIBLE,
            turn=turn,
        )

    async def delete_episode(self, episode_id: str) -> None:
        if episode_id in self.deleted:
            raise NotFoundError(episode_id)
        self.deleted.append(episode_id)


class ScriptedEngine(GenerationEngine):
    """Answers game N's turn t with ``script[N][t]`` (found from the prompt text); log-prob -1 per token."""

    kind = "transformers"

    def __init__(
        self,
        chat: ChatFormat,
        script: Mapping[int, Sequence[str]],
        max_positions: int = 8192,
        version: int = 0,
    ) -> None:
        self.chat, self.script, self._max, self._version = chat, script, max_positions, version
        self.batches: list[int] = []
        self._end = chat.tokenizer.convert_tokens_to_ids("<|im_end|>")

    def generate(self, prompts: Sequence[Sequence[int]], params: GenerationParams) -> list[Generation]:
        self.batches.append(len(prompts))
        out = []
        for prompt in prompts:
            text = self.chat.tokenizer.decode(list(prompt))
            match = re.search(r"Game (\d+)\.", text)
            assert match is not None
            turn = text.count("<|im_start|>assistant") - 1
            response = self.script[int(match.group(1))][turn]
            ids = [*self.chat.tokenizer.encode(response, add_special_tokens=False), self._end]
            out.append(Generation(ids, [-1.0] * len(ids), "stop"))
        return out

    def load_weights(self, state_dict, version: int, *, rewind=False) -> None:  # type: ignore[no-untyped-def]
        self._version = version

    @property
    def weights_version(self) -> int:
        return self._version

    @property
    def stop_token_ids(self) -> tuple[int, ...]:
        return (self._end,)

    @property
    def max_positions(self) -> int:
        return self._max


@pytest.fixture(scope="module")
def chat(zoo_cache: Path) -> ChatFormat:
    return ChatFormat(load_tokenizer("student", zoo_cache))


@pytest.fixture(scope="module")
def student(zoo_cache: Path) -> GenerationEngine:
    return make_engine("transformers", "student", cache_dir=zoo_cache, seed=0, prefix_cache_mb=64)


def tasks_of(seeds: Sequence[int]) -> list[EpisodeTask]:
    return [EpisodeTask(env="alfworld", split="train", seed=s, task_type="pick_and_place") for s in seeds]


def play(engine, chat, env, seeds, h_roll, max_new_tokens=16, seed=0, temperature=1.0):  # type: ignore[no-untyped-def]
    return asyncio.run(
        play_episodes(engine, chat, env, tasks_of(seeds), h_roll, temperature, max_new_tokens, seed)
    )


def call(action: str) -> str:
    return format_response(action, "I should move.")


def test_untrained_model_gets_feedback_turns_until_the_depth_cap(student, chat):
    env = FakeGateway()
    trajectories, failures = play(student, chat, env, [0, 1, 2], h_roll=3)
    assert failures == []
    assert [t.episode_id for t in trajectories] == env.created  # task order
    assert sorted(env.deleted) == sorted(env.created)
    for trajectory in trajectories:
        assert len(trajectory.turns) == 3 and trajectory.truncated and not trajectory.success
        assert trajectory.reward == 0.0 and trajectory.weights_version == 0
        assert len(trajectory.sampler_logprobs) == sum(trajectory.turn_tokens)
        assert all(lp <= 0.0 and math.isfinite(lp) for lp in trajectory.sampler_logprobs)
        assert all(1 <= n <= 16 for n in trajectory.turn_tokens)
        for turn in trajectory.turns:
            if turn.accepted:
                assert turn.observation.startswith("You")
            elif turn.action is None:
                assert turn.observation.startswith("Invalid tool call:")
            else:
                assert turn.observation.startswith("Nothing happens.")
            assert turn.observation.endswith("Admissible actions: go to a, go to b, look.")
    stepped = sum(t.accepted for tr in trajectories for t in tr.turns)
    assert len(env.steps) == stepped  # rejected turns never reach the env


def test_token_ids_are_prompt_then_responses_and_observations(student, chat):
    env = FakeGateway()
    (trajectory,), _ = play(student, chat, env, [4], h_roll=3)
    start = asyncio.run(FakeGateway().create_episode(EpisodeCreate(env="alfworld", split="train", seed=4)))
    prompt = chat.start(first_user_message(start)).token_ids
    ids = trajectory.token_ids
    assert ids[: len(prompt)] == prompt
    assert trajectory.turns[0].response_start == len(prompt)
    end_of_turn = chat.tokenizer.convert_tokens_to_ids("<|im_end|>")
    for turn, following in zip(trajectory.turns, trajectory.turns[1:], strict=False):
        observation = chat.tokenizer.encode(chat.observation_text(turn.observation), add_special_tokens=False)
        between = ids[turn.response_end : following.response_start]
        if ids[turn.response_end - 1] != end_of_turn:  # cut off by max_new_tokens: the worker closed it
            between = between[1:]
        assert between == observation
    last = trajectory.turns[-1]
    assert ids[last.response_end - 1] == end_of_turn or ids[last.response_end :] == [end_of_turn]
    assert len(ids) <= last.response_end + 1  # the last observation is not shown to the model


def test_scripted_play_steps_admissible_actions_and_stops_when_done(chat):
    script = {
        0: [call("go to a"), call("Go To  B")],  # matched case- and space-insensitively
        1: ["no tool call here", call("fly away"), call("go to b")],
        2: [call("look"), call("look"), call("look")],
    }
    engine = ScriptedEngine(chat, script, version=3)
    env = FakeGateway()
    (won_early, won_last, capped), failures = play(engine, chat, env, [0, 1, 2], h_roll=3)
    assert failures == []
    assert engine.batches == [3, 3, 2]  # finished episodes leave the batch
    assert [t.action for t in won_early.turns] == ["go to a", "Go To  B"]
    assert [t.accepted for t in won_early.turns] == [True, True]
    assert won_early.success and won_early.reward == 1.0 and not won_early.truncated
    assert won_early.token_ids[-1] == chat.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert won_early.token_ids[won_early.turns[-1].response_end :] == []
    assert [t.action for t in won_last.turns] == [None, "fly away", "go to b"]
    assert [t.accepted for t in won_last.turns] == [False, False, True]
    assert won_last.turns[1].observation.startswith('Nothing happens. "fly away" is not an admissible action')
    assert won_last.success and not won_last.truncated  # ended on the last allowed turn
    assert capped.truncated and not capped.success and len(capped.turns) == 3
    assert {t.weights_version for t in (won_early, won_last, capped)} == {3}
    assert [a for e, a in env.steps if e == won_early.episode_id] == ["go to a", "go to b"]  # env spelling
    assert sorted(env.deleted) == sorted(env.created)


def prompt_length(chat: ChatFormat, seed: int) -> int:
    start = asyncio.run(FakeGateway().create_episode(EpisodeCreate(env="alfworld", split="train", seed=seed)))
    return len(chat.start(first_user_message(start)))


def assert_ends_within(chat: ChatFormat, trajectory: Trajectory, limit: int, max_new_tokens: int) -> None:
    """Truncated at its last response, everything up to it within ``limit``, and the last
    observation left out because it and the next response would not have fit."""
    last = trajectory.turns[-1]
    assert trajectory.truncated and last.response_end <= limit
    assert len(trajectory.token_ids) <= last.response_end + 1  # at most the <|im_end|> closing it
    shown = len(chat.tokenizer.encode(chat.observation_text(last.observation), add_special_tokens=False))
    assert len(trajectory.token_ids) + shown + max_new_tokens > limit


def test_context_limit_truncates_before_the_model_runs_out_of_positions(chat):
    engine = ScriptedEngine(chat, {0: [call("look")] * 10})
    engine._max = prompt_length(chat, 0) + 200  # room for the first turns only
    (trajectory,), _ = play(engine, chat, FakeGateway(), [0], h_roll=10, max_new_tokens=64)
    # the script's turns are all alike: a 31-token response, then a 32-token observation and prompt
    first = prompt_length(chat, 0)
    starts = [first + 63 * k for k in range(10)]
    playable = [start for start in starts if start + 64 <= engine.max_positions]  # the 4th starts past it
    assert [t.response_start for t in trajectory.turns] == playable and len(playable) == 3
    assert_ends_within(chat, trajectory, engine.max_positions, 64)


def test_a_tasks_max_tokens_below_the_models_positions_bounds_its_trajectory(chat):
    """A run's teacher may take fewer tokens than the student's positions: each task carries its
    limit, and the trajectory, up to its last response token, never exceeds it."""
    script = {s: [call("look")] * 10 for s in (0, 1)}
    limit = prompt_length(chat, 0) + 150
    tasks = [
        EpisodeTask(env="alfworld", split="train", seed=0, max_tokens=limit),
        EpisodeTask(env="alfworld", split="train", seed=1),  # the model's 8192 positions
    ]
    (bounded, free), failures = asyncio.run(
        play_episodes(ScriptedEngine(chat, script), chat, FakeGateway(), tasks, 10, 1.0, 48, 0)
    )
    assert failures == [] and 1 <= len(bounded.turns) < 10
    assert_ends_within(chat, bounded, limit, 48)
    assert len(free.turns) == 10  # the other episode of the batch plays to its depth cap


def test_a_task_whose_first_prompt_leaves_no_room_plays_no_turn(chat):
    task = EpisodeTask(env="alfworld", split="train", seed=0, max_tokens=prompt_length(chat, 0) + 10)
    engine = ScriptedEngine(chat, {0: [call("look")]})
    (trajectory,), _ = asyncio.run(play_episodes(engine, chat, FakeGateway(), [task], 3, 1.0, 16, 0))
    assert trajectory.truncated and trajectory.turns == [] and engine.batches == []


def test_env_errors_lose_one_episode_each_and_the_rest_play_on(chat):
    seeds = [0, LOST_SEED, BROKEN_SEED, CRASH_SEED]
    script = {s: [call("go to a"), call("go to b")] for s in seeds}
    env = FakeGateway()
    outcomes = asyncio.run(
        play_episode_outcomes(ScriptedEngine(chat, script), chat, env, tasks_of(seeds), 4, 1.0, 16, 0)
    )
    played, lost, broken, crashed = outcomes
    assert isinstance(played, Trajectory) and played.success
    assert not isinstance(lost, Trajectory) and lost.task.seed == LOST_SEED
    assert "EpisodeLostError" in lost.error and lost.worker == "local"
    assert not isinstance(broken, Trajectory) and broken.task.seed == BROKEN_SEED
    assert "EngineError" in broken.error
    assert not isinstance(crashed, Trajectory) and "step at turn 0: EngineError" in crashed.error
    # only the episode the gateway lost is played again by the pool; the game's own failures stay failures
    assert (lost.reason, broken.reason, crashed.reason) == ("env_lost", "play", "play")
    assert sorted(env.deleted) == sorted(env.created)  # the lost episode is deleted too


def test_a_lost_episode_is_env_lost_and_a_silent_gateway_env_unreachable():
    assert failure_reason(EpisodeLostError("its env worker died")) == "env_lost"
    for error in (EngineError("the game raised"), InputError("illegal action"), NotFoundError("expired")):
        assert failure_reason(error) == "play"
    for silent in (httpx.ConnectError("refused"), httpx.RemoteProtocolError("disconnected")):
        assert failure_reason(silent) == "env_unreachable"
    assert failure_reason(httpx.ReadTimeout("a slow game")) == "play"  # the gateway is there
    assert failure_reason(httpx.HTTPStatusError("500", request=None, response=None)) == "play"  # type: ignore[arg-type]


def test_same_seed_replays_the_same_trajectories(student, chat):
    first, _ = play(student, chat, FakeGateway(), [0, 1], h_roll=2, seed=7)
    again, _ = play(student, chat, FakeGateway(), [0, 1], h_roll=2, seed=7)
    other, _ = play(student, chat, FakeGateway(), [0, 1], h_roll=2, seed=8)
    assert [t.token_ids for t in first] == [t.token_ids for t in again]
    assert [t.sampler_logprobs for t in first] == [t.sampler_logprobs for t in again]
    assert [t.token_ids for t in first] != [t.token_ids for t in other]


def test_invalid_tasks_and_depth_are_refused_before_any_episode_starts(chat):
    env = FakeGateway()
    bad = [EpisodeTask(env="nethack", split="train", seed=0)]
    with pytest.raises(InputError, match="not a valid episode"):
        asyncio.run(play_episodes(ScriptedEngine(chat, {}), chat, env, bad, 3, 1.0, 16, 0))
    with pytest.raises(InputError, match="h_roll"):
        asyncio.run(play_episodes(ScriptedEngine(chat, {}), chat, env, tasks_of([0]), 0, 1.0, 16, 0))
    assert env.created == []


def test_a_task_reminder_ends_every_observation_the_model_reads(chat):
    script = {0: ["no tool call here", call("fly away"), call("go to a"), call("go to b")]}
    env = FakeGateway()
    (reminded,), _ = asyncio.run(
        play_episodes(
            ScriptedEngine(chat, script), chat, env, tasks_of([0]), 4, 1.0, 16, 0, task_reminder=True
        )
    )
    (plain,), _ = play(ScriptedEngine(chat, script), chat, FakeGateway(), [0], h_roll=4)
    assert [t.accepted for t in reminded.turns] == [False, False, True, True] and reminded.success
    for with_reminder, without in zip(reminded.turns, plain.turns, strict=True):
        # invalid call, inadmissible action and env step alike: the plain observation, then the task
        assert with_reminder.observation == without.observation + "\nYour task is to: go to b."
    text = chat.tokenizer.decode(reminded.token_ids, skip_special_tokens=False)
    assert text.count("Your task is to: go to b.") == 1 + 3  # the opening, then 3 shown observations
    assert len(reminded.token_ids) > len(plain.token_ids)
