"""Expert episodes rendered into token ids exactly as the agent loop renders play.

The first user message and every observation come from ``services.rollout_worker.episode_text``
(the same functions the agent loop calls), each response is the bare tool call for the expert's
action (no ``<think>``: the loss lies on response tokens only, and short responses keep it on the
decision), and the ids are built with ``ChatFormat``/``Conversation``. As in play, the
observation after the last turn is never appended: the model never reads it.

Pure module: no torch.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from services.agent.chat_format import ChatFormat
from services.agent.tool_calls import ALFWORLD_STEP, ToolSpec, format_response
from services.contracts.expert_data import ExpertEpisode
from services.errors import InputError
from services.rollout_worker.episode_text import first_user_message, step_observation


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


def expert_response(action: str, tool: ToolSpec = ALFWORLD_STEP) -> str:
    """What the model is taught to answer: the tool call of the expert's action."""
    return format_response(action, tool=tool)


def render_episode(
    chat: ChatFormat, episode: ExpertEpisode, max_tokens: int | None = None
) -> RenderedEpisode:
    """The episode's ids and response spans; with ``max_tokens``, only the turns that fit whole."""
    conversation = chat.start(first_user_message(episode.start))
    last = len(episode.turns) - 1
    kept_length, kept_spans = len(conversation), 0
    for index, turn in enumerate(episode.turns):
        conversation.add_response_text(expert_response(turn.action, chat.tool))
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
    chat: ChatFormat, episodes: Sequence[ExpertEpisode], max_tokens: int | None = None
) -> list[RenderedEpisode]:
    return [render_episode(chat, episode, max_tokens) for episode in episodes]
