"""The multi-turn agent loop: many episodes played together against the env gateway (no Ray here).

Per turn, every running episode's conversation goes into ONE batched ``engine.generate`` call;
then each response is parsed and validated client-side (``services.agent.tool_calls``):

* a response that does not parse, or names an action outside the admissible set, gets feedback
  as its observation and no env step (the gateway would answer 422); the turn still counts;
* an admissible action is stepped on the gateway; all steps of a turn run concurrently.

An episode ends when the game is done; after ``h_roll`` turns (``truncated`` unless the game
ended on that turn); or when its next turn would not fit its limit (``truncated``): the smaller of
the model's positions and the task's ``max_tokens`` (a training run sets its teacher's limit
there). A turn fits when its prompt plus ``max_new_tokens`` does; the observation is known only
after the env step, so it is appended only if it and the next response fit, else the episode ends
at its last response. Either way the observation after an episode's last turn is recorded in its
``TurnRecord`` but not appended to the token ids: the model never reads it, and every token up to
the last response's fits the limit. Finished episodes are deleted on the gateway at once. A
gateway error loses one episode, which comes back as an ``EpisodeFailure``, never silently dropped:
reason ``env_lost`` when the gateway lost it (its env worker died: the pool plays the chunk again),
else ``play`` (the game failed on an action, say: a failure of the environment, kept as one).

Sampling is seeded per turn from ``seed`` (``seeds.turn_seed``), so the same tasks, seed and
weights replay the same trajectories.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import ParamSpec, Protocol

import httpx
from pydantic import ValidationError

from services.agent.chat_format import ChatFormat, Conversation
from services.agent.tool_calls import ParseFailure
from services.contracts.action_templates import match_admissible
from services.contracts.env_gateway import EpisodeCreate, EpisodeStart, StepResult
from services.contracts.rollout import EpisodeFailure, EpisodeTask, FailureReason
from services.contracts.trajectory import Trajectory, TurnRecord
from services.env_gateway.episode_errors import ActionRejectedError, EpisodeLostError, GatewayBusyError
from services.envs.protocols import EnvProtocol, env_protocol
from services.errors import ConflictError, InputError, NotFoundError, TurnOPDError
from services.rollout_worker.engines.base import Generation, GenerationEngine, GenerationParams
from services.rollout_worker.episode_text import (
    first_user_message,
    inadmissible_observation,
    invalid_call_observation,
    step_observation,
    task_reminder,
)
from services.rollout_worker.seeds import turn_seed

log = logging.getLogger(__name__)
P = ParamSpec("P")

# Gateway errors that lose one episode (the others play on); anything else is a bug and propagates.
_EPISODE_ERRORS = (TurnOPDError, httpx.HTTPError)
# the gateway did not answer: nobody listening, or the connection dropped (its process died); a
# call that timed out on a live gateway (a slow game, ``env_timeout_s``) is not among them
_SILENT_GATEWAY = (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ConnectTimeout)
_BUSY_RETRIES = 5
_BUSY_BACKOFF_S = 0.5

EpisodeOutcome = Trajectory | EpisodeFailure


class EpisodeClient(Protocol):
    """What the loop needs of the env gateway (``EnvGatewayClient`` is the real one)."""

    async def create_episode(self, request: EpisodeCreate) -> EpisodeStart: ...

    async def step(self, episode_id: str, action: str) -> StepResult: ...

    async def delete_episode(self, episode_id: str) -> None: ...


@dataclass
class _Episode:
    """One episode in play: its conversation, the turns so far, and how it stands."""

    task: EpisodeTask
    start: EpisodeStart
    conversation: Conversation
    admissible: list[str]
    protocol: EnvProtocol
    max_tokens: int  # the episode's limit: the model's positions, or the task's max_tokens if less
    reminder: str | None = None
    turns: list[TurnRecord] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    reward: float = 0.0
    won: bool = False
    done: bool = False
    truncated: bool = False
    error: str | None = None
    reason: FailureReason = "play"  # why it failed, once ``error`` is set
    closed: bool = False

    @property
    def running(self) -> bool:
        return not (self.done or self.truncated or self.error is not None)

    def outcome(self, weights_version: int, worker: str) -> EpisodeOutcome:
        if self.error is not None:
            return EpisodeFailure(task=self.task, error=self.error, worker=worker, reason=self.reason)
        return Trajectory(
            episode_id=self.start.episode_id,
            env=self.task.env,
            split=self.task.split,
            task_type=self.start.task_type,
            token_ids=self.conversation.token_ids,
            turns=self.turns,
            sampler_logprobs=self.logprobs,
            reward=self.reward,
            success=self.won,
            truncated=self.truncated,
            weights_version=weights_version,
        )


async def play_episode_outcomes(
    engine: GenerationEngine,
    chat: ChatFormat,
    env: EpisodeClient,
    tasks: Sequence[EpisodeTask],
    h_roll: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    *,
    worker: str = "local",
    task_reminder: bool = False,
) -> list[EpisodeOutcome]:
    """Play ``tasks`` together; one outcome per task, aligned with ``tasks``."""
    if h_roll < 1:
        raise InputError(f"h_roll must be >= 1, got {h_roll}")
    requests = [_create_request(task) for task in tasks]
    version = engine.weights_version
    positions = engine.max_positions
    opened = await asyncio.gather(
        *(
            _open(env, chat, t, r, worker, task_reminder, positions)
            for t, r in zip(tasks, requests, strict=True)
        )
    )
    live = [e for e in opened if isinstance(e, _Episode)]
    try:
        for turn in range(h_roll):
            for episode in live:
                if episode.running and len(episode.conversation) + max_new_tokens > episode.max_tokens:
                    episode.truncated = True  # the next response might not fit the episode's limit
            playing = [e for e in live if e.running]
            if not playing:
                break
            params = GenerationParams(max_new_tokens, temperature, seed=turn_seed(seed, turn))
            generations = engine.generate([e.conversation.token_ids for e in playing], params)
            last = turn == h_roll - 1
            await asyncio.gather(
                *(
                    _play_turn(env, e, g, turn, last, max_new_tokens)
                    for e, g in zip(playing, generations, strict=True)
                )
            )
            await _close(env, [e for e in live if not e.running and not e.closed])
        for episode in live:
            if episode.running:
                episode.truncated = True  # the depth cap h_roll
    finally:
        await _close(env, [e for e in live if not e.closed])
    if engine.weights_version != version:
        raise ConflictError(f"weights changed from version {version} to {engine.weights_version} during play")
    return [e.outcome(version, worker) if isinstance(e, _Episode) else e for e in opened]


def _create_request(task: EpisodeTask) -> EpisodeCreate:
    try:
        return EpisodeCreate.model_validate(
            {"env": task.env, "split": task.split, "seed": task.seed, "task_type": task.task_type}
        )
    except ValidationError as exc:
        raise InputError(f"task {task.model_dump()} is not a valid episode: {exc}") from None


async def _open(
    env: EpisodeClient,
    chat: ChatFormat,
    task: EpisodeTask,
    request: EpisodeCreate,
    worker: str,
    remind: bool,
    max_positions: int,
) -> "_Episode | EpisodeFailure":
    """Create the episode on the gateway (retrying while it is at capacity) and render its prompt."""
    for attempt in range(_BUSY_RETRIES + 1):
        try:
            start = await env.create_episode(request)
            break
        except GatewayBusyError as exc:
            if attempt == _BUSY_RETRIES:
                return EpisodeFailure(task=task, error=f"create: {exc}", worker=worker)
            await asyncio.sleep(_BUSY_BACKOFF_S * 2**attempt)
        except _EPISODE_ERRORS as exc:
            error = f"create: {type(exc).__name__}: {exc}"
            return EpisodeFailure(task=task, error=error, worker=worker, reason=failure_reason(exc))
    protocol = env_protocol(task.env)
    conversation = protocol.chat(chat).start(first_user_message(start, protocol.list_actions))
    reminder = task_reminder(start, remind if task.task_reminder is None else task.task_reminder)
    limit = max_positions if task.max_tokens is None else min(task.max_tokens, max_positions)
    return _Episode(task, start, conversation, list(start.admissible_actions), protocol, limit, reminder)


async def _play_turn(
    env: EpisodeClient, episode: _Episode, generation: Generation, turn: int, last: bool, max_new_tokens: int
) -> None:
    """Record one response, act on it (feedback or env step), and append the observation if it and
    the next response fit the episode's limit (else the episode ends here, truncated)."""
    conversation = episode.conversation
    start, end = conversation.add_response_ids(generation.token_ids)
    episode.logprobs.extend(generation.logprobs)
    listed, reminder = episode.protocol.list_actions, episode.reminder
    parsed = episode.protocol.parse(conversation.response_text(generation.token_ids))
    action: str | None = None
    accepted = False
    if isinstance(parsed, ParseFailure):
        observation = invalid_call_observation(parsed, episode.admissible, listed, reminder)
    else:
        action = parsed.action
        command = match_admissible(action, episode.admissible)
        result = None if command is None else await _step(env, episode, command, turn)
        if episode.error is not None:
            return
        if result is None:
            observation = inadmissible_observation(action, episode.admissible, listed, reminder)
        else:
            accepted = True
            observation = step_observation(result, listed, reminder)
            episode.reward += result.reward
            episode.admissible = list(result.admissible_actions)
            episode.done, episode.won = result.done, result.won
    episode.turns.append(
        TurnRecord(
            index=turn,
            response_start=start,
            response_end=end,
            action=action,
            accepted=accepted,
            observation=observation,
        )
    )
    room = episode.max_tokens - max_new_tokens
    if episode.running and not last and not conversation.add_observation(observation, room):
        episode.truncated = True  # the observation and the next response would not fit


async def _step(env: EpisodeClient, episode: _Episode, command: str, turn: int) -> StepResult | None:
    """Step the env; None when the gateway rejected the action (its admissible set is adopted)."""
    try:
        return await env.step(episode.start.episode_id, command)
    except ActionRejectedError as exc:
        episode.admissible = list(exc.admissible_actions)
        return None
    except _EPISODE_ERRORS as exc:
        episode.error = f"step at turn {turn}: {type(exc).__name__}: {exc}"
        episode.reason = failure_reason(exc)
        return None


def failure_reason(exc: BaseException) -> FailureReason:
    """``env_lost`` when the gateway lost the episode (HTTP 410: its env worker died) and
    ``env_unreachable`` when the gateway did not answer at all (refused, or closed the connection
    without an answer: its process died), both of which the pool plays again; ``play`` for any
    other error, the environment's own failures among them."""
    if isinstance(exc, EpisodeLostError):
        return "env_lost"
    return "env_unreachable" if isinstance(exc, _SILENT_GATEWAY) else "play"


async def _close(env: EpisodeClient, episodes: Sequence[_Episode]) -> None:
    """Delete finished episodes on the gateway; a failed delete only costs gateway memory until its TTL."""

    async def close(episode: _Episode) -> None:
        episode.closed = True
        try:
            await env.delete_episode(episode.start.episode_id)
        except NotFoundError:
            pass  # already gone (expired or lost): nothing to free
        except _EPISODE_ERRORS as exc:
            log.warning("could not delete episode %s: %s", episode.start.episode_id, exc)

    await asyncio.gather(*(close(e) for e in episodes))


def _split_outcomes(
    play: Callable[P, Awaitable[list[EpisodeOutcome]]],
) -> Callable[P, Awaitable[tuple[list[Trajectory], list[EpisodeFailure]]]]:
    async def split(*args: P.args, **kwargs: P.kwargs) -> tuple[list[Trajectory], list[EpisodeFailure]]:
        outcomes = await play(*args, **kwargs)
        return (
            [o for o in outcomes if isinstance(o, Trajectory)],
            [o for o in outcomes if isinstance(o, EpisodeFailure)],
        )

    return split


play_episodes = _split_outcomes(play_episode_outcomes)
"""``play_episode_outcomes``, its outcomes split: the trajectories in task order, and the episodes
that failed."""
