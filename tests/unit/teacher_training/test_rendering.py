"""Expert episodes rendered as the agent loop renders play: spans, loss mask, round trip, truncation."""

import pytest
from expert_episodes import SCRIPT, scripted_episode

from services.agent.chat_format import ChatFormat
from services.agent.env_profiles import chat_for_env
from services.agent.tool_calls import WEBSHOP_STEP, ParsedAction, format_tool_call, parse_response
from services.contracts.expert_data import ExpertEpisode
from services.errors import InputError
from services.rollout_worker.episode_text import first_user_message, step_observation
from services.teacher_training.rendering import render_episode


def decode(chat: ChatFormat, ids: list[int]) -> str:
    return str(chat.tokenizer.decode(ids, skip_special_tokens=False))


def test_every_span_is_the_expert_tool_call_and_parses_back_to_the_expert_action(
    chat: ChatFormat, episode: ExpertEpisode
):
    rendered = render_episode(chat, episode)
    assert len(rendered.response_spans) == len(episode.turns) == 5
    for (start, end), turn in zip(rendered.response_spans, episode.turns, strict=True):
        text = decode(chat, rendered.token_ids[start:end])
        assert text == format_tool_call(turn.action) + "<|im_end|>"
        assert parse_response(text.removesuffix("<|im_end|>")) == ParsedAction(
            action=turn.action, thought=None
        )


def test_ids_equal_the_whole_conversation_rendered_at_once_without_the_last_observation(
    chat: ChatFormat, episode: ExpertEpisode
):
    rendered = render_episode(chat, episode)
    turns: list[tuple[str, str | None]] = [
        (format_tool_call(t.action), step_observation(t.result)) for t in episode.turns
    ]
    turns[-1] = (turns[-1][0], None)  # the agent loop never shows the observation after the last turn
    text = chat.full_text(first_user_message(episode.start), turns)
    assert decode(chat, rendered.token_ids) == text
    assert "You put the apple 1 in/on the drawer 1." not in text
    assert rendered.token_ids[-1] == chat.tokenizer.convert_tokens_to_ids("<|im_end|>")


def test_loss_mask_is_true_exactly_on_the_response_tokens(chat: ChatFormat, episode: ExpertEpisode):
    rendered = render_episode(chat, episode)
    mask = rendered.loss_mask()
    assert len(mask) == len(rendered.token_ids)
    masked = [i for i, on in enumerate(mask) if on]
    assert masked == [i for start, end in rendered.response_spans for i in range(start, end)]
    assert sum(mask) == rendered.num_response_tokens
    prompt_end = rendered.response_spans[0][0]
    assert not any(mask[:prompt_end])
    # After the prompt, outside the spans lie only template and observation text: no tool call.
    after_prompt = zip(rendered.token_ids[prompt_end:], mask[prompt_end:], strict=True)
    outside = decode(chat, [t for t, on in after_prompt if not on])
    assert "<tool_call>" not in outside
    assert SCRIPT[0][1] in outside


def test_max_tokens_keeps_only_whole_turns(chat: ChatFormat, episode: ExpertEpisode):
    full = render_episode(chat, episode)
    cut_at = full.response_spans[2][1] + 3  # inside turn 2's observation: turns 0..2 fit
    cut = render_episode(chat, episode, max_tokens=cut_at)
    assert cut.response_spans == full.response_spans[:3]
    assert cut.token_ids == full.token_ids[: full.response_spans[2][1]]
    with pytest.raises(InputError, match="does not fit"):
        render_episode(chat, episode, max_tokens=full.response_spans[0][0])


def test_an_unfinished_episode_renders_every_turn_it_has(chat: ChatFormat):
    partial = scripted_episode(turns=2)
    rendered = render_episode(chat, partial)
    assert [decode(chat, rendered.token_ids[s:e]) for s, e in rendered.response_spans] == [
        format_tool_call(SCRIPT[0][0]) + "<|im_end|>",
        format_tool_call(SCRIPT[1][0]) + "<|im_end|>",
    ]


def test_a_webshop_chat_teaches_the_webshop_tool(chat: ChatFormat, episode: ExpertEpisode):
    shop_chat = chat_for_env(chat, "webshop")
    rendered = render_episode(shop_chat, episode)
    start, end = rendered.response_spans[0]
    text = decode(chat, rendered.token_ids[start:end])
    assert text == format_tool_call(episode.turns[0].action, WEBSHOP_STEP) + "<|im_end|>"
    assert "webshop_step" in decode(chat, rendered.token_ids[:start])
