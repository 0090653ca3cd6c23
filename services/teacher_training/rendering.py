"""Expert episodes rendered into token ids exactly as the agent loop renders play.

The first user message and every observation come from ``services.rollout_worker.episode_text``
(the same functions the agent loop calls); each response is the expert's thought as a short
``<think>`` (``expert_thoughts``; optional) followed by the tool call of the expert's action; the
ids are built with ``ChatFormat``/``Conversation``. As in play, the observation after the last
turn is never appended: the model never reads it.

Pure module: no torch.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from services.agent.chat_format import ChatFormat
from services.agent.tool_calls import format_response
from services.contracts.expert_data import ExpertEpisode
from services.errors import InputError
from services.rollout_worker.episode_text import first_user_message, step_observation
from services.teacher_training.expert_thoughts import expert_thoughts


@dataclass(frozen=True)
class RenderedEpisode:
    """One episode's token ids and the half-open span of every supervised response."""

    token_ids: list[int]
    response_spans: list[tuple[int, int]]

    @property
    def num_response_tokens(self) -> int:
        return sum(end - start for start, end in self.response_spans)

    def loss_mask(self) -> list[bool]:
        """True exactly at the response tokens (the ids the model is trained to produce)."""
        mask = [False] * len(self.token_ids)
        for start, end in self.response_spans:
            mask[start:end] = [True] * (end - start)
        return mask


def expert_response(action: str, thought: str | None = None) -> str:
    """What the model is taught to answer: the expert's thought (if any), then its tool call."""
    return format_response(action, thought)


def render_episode(
    chat: ChatFormat, episode: ExpertEpisode, max_tokens: int | None = None, think: bool = True
) -> RenderedEpisode:
    """The episode's ids and response spans; with ``max_tokens``, only the turns that fit whole."""
    thoughts: list[str | None] = list(expert_thoughts(episode)) if think else [None] * len(episode.turns)
    conversation = chat.start(first_user_message(episode.start))
    last = len(episode.turns) - 1
    kept_length, kept_spans = len(conversation), 0
    for index, (turn, thought) in enumerate(zip(episode.turns, thoughts, strict=True)):
        conversation.add_response_text(expert_response(turn.action, thought))
        if max_tokens is not None and len(conversation) > max_tokens:
            break
        kept_length, kept_spans = len(conversation), conversation.num_turns
        if index < last:
            conversation.add_observation(step_observation(turn.result))
    if kept_spans == 0:
        raise InputError(
            f"the first turn of episode {episode.start.game_id} does not fit in {max_tokens} tokens"
        )
    return RenderedEpisode(conversation.token_ids[:kept_length], conversation.response_spans[:kept_spans])


def render_episodes(
    chat: ChatFormat, episodes: Sequence[ExpertEpisode], max_tokens: int | None = None, think: bool = True
) -> list[RenderedEpisode]:
    return [render_episode(chat, episode, max_tokens, think) for episode in episodes]
