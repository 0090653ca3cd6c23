"""Expert episodes rendered into token ids exactly as the agent loop renders play.

The first user message and every observation come from ``services.rollout_worker.episode_text``
(the same functions the agent loop calls); each response is the expert's thought as a short
``<think>`` (``expert_thoughts``; optional) followed by the tool call of the expert's action; the
ids are built with ``ChatFormat``/``Conversation``. As in play, the observation after the last
turn is never appended: the model never reads it. Detours and rejected attempts are rendered but
never supervised (see ``render_episode``).

Pure module: no torch.
"""

import difflib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Concatenate, ParamSpec

from services.agent.chat_format import ChatFormat
from services.contracts.expert_data import ExpertEpisode
from services.envs.protocols import HOUSEHOLD_PROTOCOL, EnvProtocol
from services.errors import InputError
from services.rollout_worker.episode_text import (
    first_user_message,
    inadmissible_observation,
    step_observation,
    task_reminder,
)
from services.teacher_training.expert_thoughts import FalseBelief, expert_thoughts, false_beliefs, goal_drifts

P = ParamSpec("P")


@dataclass(frozen=True)
class RenderedEpisode:
    """One episode's token ids, the half-open span of every supervised response, the spans of
    inserted mistakes (rejected attempts, false beliefs, drifted turns), which no loss may teach, and
    the spans of supervised tokens that are new against the response before (``novel_spans``, only
    when asked for)."""

    token_ids: list[int]
    response_spans: list[tuple[int, int]]
    mistake_spans: list[tuple[int, int]] = field(default_factory=list)
    novel_spans: list[tuple[int, int]] = field(default_factory=list)

    @property
    def num_response_tokens(self) -> int:
        return sum(end - start for start, end in self.response_spans)

    def loss_mask(self) -> list[bool]:
        """True exactly at the response tokens (the ids the model is trained to produce)."""
        mask = [False] * len(self.token_ids)
        for start, end in self.response_spans:
            mask[start:end] = [True] * (end - start)
        return mask


def expert_response(
    action: str, thought: str | None = None, protocol: EnvProtocol = HOUSEHOLD_PROTOCOL
) -> str:
    """What the model is taught to answer: the expert's thought (if any), then its tool call (or the
    env's own form of the action)."""
    return protocol.respond(action, thought)


def new_token_spans(previous: Sequence[int], current: Sequence[int], offset: int) -> list[tuple[int, int]]:
    """The spans of ``current`` (a response's ids, starting at ``offset`` in the episode) that are
    not a copy of ``previous`` (the response before it): what a token-level diff inserts or replaces,
    and the token right after what it deletes (where the copy skipped an entry).

    A thought is mostly the last thought copied; the new tokens are where it decides (a target newly
    seen, a receptacle crossed off, the next action).
    """
    matcher = difflib.SequenceMatcher(None, list(previous), list(current), autojunk=False)
    spans = []
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            spans.append((offset + j1, offset + j2))
        elif tag == "delete" and j1 < len(current):  # the token where a crossed-off entry was skipped
            spans.append((offset + j1, offset + j1 + 1))
    return sorted(set(spans))


def rejected_attempt(
    admissible_before: Sequence[Sequence[str]], location: str | None, rng: random.Random
) -> str | None:
    """An inadmissible action a policy plausibly tries: one admissible earlier but not now, or
    going where it already is; None when there is none."""
    now = set(admissible_before[-1])
    stale = {a for earlier in admissible_before[:-1] for a in earlier} - now
    if location is not None and f"go to {location}" not in now:
        stale.add(f"go to {location}")
    return rng.choice(sorted(stale)) if stale else None


def render_episode(
    chat: ChatFormat,
    episode: ExpertEpisode,
    max_tokens: int | None = None,
    think: bool = True,
    reject_rate: float = 0.0,
    seed: int = 0,
    *,
    protocol: EnvProtocol = HOUSEHOLD_PROTOCOL,
    false_belief_rate: float = 0.0,
    goal_drift_rate: float = 0.0,
    remind_task: bool = False,
    novel: bool = False,
) -> RenderedEpisode:
    """The episode's ids and supervised response spans; with ``max_tokens``, only the turns that fit.

    ``chat`` must show the protocol's tool and system prompt (``protocol.chat(chat)``), as in play.
    Thoughts (``think``) and rejected attempts exist for the household protocol only. Only expert
    turns are supervised. Detour turns (collected) and rejected attempts (inserted here with chance
    ``reject_rate`` before an expert turn, seeded by ``seed`` and the game) are rendered as play
    renders them (the rejection's feedback is the agent loop's) but are not targets: the model
    learns what to do after a mistake, never the mistake. The responses of inserted mistakes (rejected
    attempts, false beliefs, drifted turns) are listed in ``mistake_spans`` so that the trainer's
    auxiliary context loss can leave them out too. With ``false_belief_rate`` (household, with
    thoughts) an expert turn may follow a *false belief* acted on (``expert_thoughts.false_belief``:
    an absent object "seen" and taken, or a receptacle the room lacks gone to), rejected; the
    expert's turn after it thinks afresh from the observations, which teaches the model not to copy
    a wrong belief forward. With ``goal_drift_rate`` (household, with thoughts) an expert turn after
    the first may be rendered with its goal restated wrong (``expert_thoughts.drifted_thought``) and
    its own action; that turn is context, not a target, and the turns after it restate the true
    goal, which teaches the model to read the goal from the task, not from its last thought.
    ``remind_task`` ends every observation with the task restated, as play does with
    ``[rollout] task_reminder``. ``novel`` fills ``novel_spans``: in every supervised response, the
    tokens that are new against the response rendered before it (``new_token_spans``; all of the first).
    """
    household = protocol is HOUSEHOLD_PROTOCOL
    thoughts: list[str | None] = (
        list(expert_thoughts(episode)) if think and household else [None] * len(episode.turns)
    )
    # (the ":seen" stream label predates the name false_belief; kept so renderings stay as measured)
    beliefs: list[FalseBelief | None] = (
        false_beliefs(episode, false_belief_rate, random.Random(f"{seed}:{episode.start.game_id}:seen"))
        if think and household and false_belief_rate > 0.0
        else [None] * len(episode.turns)
    )
    drifts: list[str | None] = (
        goal_drifts(episode, goal_drift_rate, random.Random(f"{seed}:{episode.start.game_id}:drift"))
        if think and household and goal_drift_rate > 0.0
        else [None] * len(episode.turns)
    )
    if not household:
        reject_rate = 0.0
    listed, reminder = protocol.list_actions, task_reminder(episode.start, remind_task)
    rng = random.Random(f"{seed}:{episode.start.game_id}")
    conversation = chat.start(first_user_message(episode.start, listed))
    last = len(episode.turns) - 1
    admissible_seen: list[list[str]] = [list(episode.start.admissible_actions)]
    location: str | None = None
    kept_length, kept_spans, spans, mistakes = len(conversation), 0, [], []
    new: list[list[tuple[int, int]]] = []  # per supervised span
    previous: list[int] = []
    for index, (turn, thought, belief, drift) in enumerate(
        zip(episode.turns, thoughts, beliefs, drifts, strict=True)
    ):
        if belief is not None:
            mistakes.append(
                conversation.add_response_text(expert_response(belief.action, belief.thought, protocol))
            )
            previous = conversation.token_ids[mistakes[-1][0] : mistakes[-1][1]]
            conversation.add_observation(
                inadmissible_observation(belief.action, admissible_seen[-1], listed, reminder)
            )
        attempt = None
        if not turn.detour and reject_rate > 0.0 and rng.random() < reject_rate:
            attempt = rejected_attempt(admissible_seen, location, rng)
        if attempt is not None:
            mistakes.append(conversation.add_response_text(expert_response(attempt, thought, protocol)))
            previous = conversation.token_ids[mistakes[-1][0] : mistakes[-1][1]]
            conversation.add_observation(
                inadmissible_observation(attempt, admissible_seen[-1], listed, reminder)
            )
        span = conversation.add_response_text(expert_response(turn.action, drift or thought, protocol))
        if max_tokens is not None and len(conversation) > max_tokens:
            break
        if drift is not None:
            mistakes.append(span)
        elif not turn.detour:
            spans.append(span)
            if novel:
                new.append(new_token_spans(previous, conversation.token_ids[span[0] : span[1]], span[0]))
        previous = conversation.token_ids[span[0] : span[1]]
        kept_length, kept_spans = len(conversation), len(spans)
        if index < last:
            conversation.add_observation(step_observation(turn.result, listed, reminder))
        admissible_seen.append(list(turn.result.admissible_actions))
        if turn.action.startswith("go to "):
            location = turn.action.removeprefix("go to ")
    if kept_spans == 0:
        raise InputError(
            f"the first expert turn of episode {episode.start.game_id} does not fit in {max_tokens} tokens"
        )
    kept_mistakes = [(start, end) for start, end in mistakes if end <= kept_length]
    kept_new = [piece for pieces in new[:kept_spans] for piece in pieces]
    return RenderedEpisode(conversation.token_ids[:kept_length], spans[:kept_spans], kept_mistakes, kept_new)


def _for_each_episode(
    render: Callable[Concatenate[ChatFormat, ExpertEpisode, P], RenderedEpisode],
) -> Callable[Concatenate[ChatFormat, Sequence[ExpertEpisode], P], list[RenderedEpisode]]:
    def each(
        chat: ChatFormat, episodes: Sequence[ExpertEpisode], *args: P.args, **kwargs: P.kwargs
    ) -> list[RenderedEpisode]:
        return [render(chat, episode, *args, **kwargs) for episode in episodes]

    return each


render_episodes = _for_each_episode(render_episode)
"""``render_episode`` of every episode, with the same options."""
