"""Expert episodes rendered as the agent loop renders play: spans, loss mask, round trip, truncation."""

import itertools
from typing import Any

import pytest
from expert_episodes import SCRIPT, scripted_episode

from services.agent.chat_format import ChatFormat
from services.agent.tool_calls import (
    WEBSHOP_STEP,
    ParsedAction,
    format_response,
    format_tool_call,
    parse_response,
)
from services.contracts.expert_data import ExpertEpisode
from services.envs.protocols import env_protocol
from services.errors import InputError
from services.rollout_worker.episode_text import first_user_message, step_observation, task_reminder
from services.teacher_training.expert_thoughts import expert_thoughts
from services.teacher_training.rendering import RenderedEpisode, new_token_spans, render_episode


def decode(chat: ChatFormat, ids: list[int]) -> str:
    return str(chat.tokenizer.decode(ids, skip_special_tokens=False))


def texts(chat: ChatFormat, rendered: RenderedEpisode, spans: list[tuple[int, int]]) -> list[str]:
    """The decoded text of each span of a rendering."""
    return [decode(chat, rendered.token_ids[a:b]) for a, b in spans]


def seeded(chat: ChatFormat, episode: ExpertEpisode, **options: Any) -> RenderedEpisode:
    """A rendering with inserted mistakes, after checking the same seed renders it again."""
    rendered = render_episode(chat, episode, **options)
    assert rendered == render_episode(chat, episode, **options)
    return rendered


def test_every_span_is_the_expert_thought_and_tool_call_and_parses_back_to_the_expert_action(
    chat: ChatFormat, episode: ExpertEpisode
):
    rendered = render_episode(chat, episode)
    thoughts = expert_thoughts(episode)
    assert len(rendered.response_spans) == len(episode.turns) == 5
    for (start, end), turn, thought in zip(rendered.response_spans, episode.turns, thoughts, strict=True):
        text = decode(chat, rendered.token_ids[start:end])
        assert text == format_response(turn.action, thought) + "<|im_end|>"
        parsed = parse_response(text.removesuffix("<|im_end|>"))
        assert parsed == ParsedAction(action=turn.action, thought=thought)


def test_without_think_every_span_is_the_bare_tool_call(chat: ChatFormat, episode: ExpertEpisode):
    rendered = render_episode(chat, episode, think=False)
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
        (format_response(t.action, thought), step_observation(t.result))
        for t, thought in zip(episode.turns, expert_thoughts(episode), strict=True)
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
    rendered = render_episode(chat, partial, think=False)
    assert [decode(chat, rendered.token_ids[s:e]) for s, e in rendered.response_spans] == [
        format_tool_call(SCRIPT[0][0]) + "<|im_end|>",
        format_tool_call(SCRIPT[1][0]) + "<|im_end|>",
    ]


def test_rejected_attempts_are_rendered_with_the_agent_loops_feedback_and_never_supervised(
    chat: ChatFormat, episode: ExpertEpisode
):
    plain = render_episode(chat, episode)
    noisy = seeded(chat, episode, reject_rate=0.99, seed=3)
    text = decode(chat, noisy.token_ids)
    # Turn 0 has nothing stale to try; later turns try a stale action or the current place.
    assert text.count("is not an admissible action here") >= 3
    assert "go to countertop 1" in text.split("take apple 1 from countertop 1")[0]
    # Exactly the expert's responses are targets, and they are the plain rendering's responses.
    assert texts(chat, noisy, noisy.response_spans) == texts(chat, plain, plain.response_spans)
    assert len(noisy.token_ids) > len(plain.token_ids)
    assert render_episode(chat, episode, reject_rate=0.0, seed=3) == plain
    # each rejected attempt's response is listed as a mistake, and nothing else is
    assert plain.mistake_spans == []
    feedback = [
        decode(chat, noisy.token_ids[b:]).split("<|im_start|>assistant")[0] for _, b in noisy.mistake_spans
    ]
    assert len(feedback) == text.count("is not an admissible action here")
    assert all("is not an admissible action here" in f for f in feedback)


def test_rejected_attempt_is_stale_or_where_the_agent_stands():
    import random

    from services.teacher_training.rendering import rejected_attempt

    rng = random.Random(0)
    history = [["go to a 1", "go to b 1", "look"], ["go to b 1", "open a 1", "look"]]
    picks = {rejected_attempt(history, "a 1", rng) for _ in range(50)}
    assert picks == {"go to a 1"}  # stale, and also where it stands
    assert rejected_attempt([["look"]], None, rng) is None
    assert {rejected_attempt([["x", "y"], ["y"]], None, rng) for _ in range(20)} == {"x"}


def test_detour_turns_are_rendered_but_not_supervised(chat: ChatFormat, episode: ExpertEpisode):
    from services.contracts.expert_data import ExpertTurn

    first = episode.turns[0]
    detour = ExpertTurn(
        action="go to sinkbasin 1",
        result=first.result.model_copy(
            update={
                "observation": "You arrive at sinkbasin 1. On the sinkbasin 1, you see nothing.",
                "admissible_actions": ["go to countertop 1", "go to drawer 1", "look"],
                "expert_action": first.action,
            }
        ),
        detour=True,
    )
    with_detour = ExpertEpisode(start=episode.start, turns=[detour, *episode.turns])
    rendered = render_episode(chat, with_detour)
    assert len(rendered.response_spans) == len(episode.turns)
    first_target = decode(chat, rendered.token_ids[slice(*rendered.response_spans[0])])
    assert '"go to countertop 1"' in first_target
    assert "sinkbasin 1" in decode(chat, rendered.token_ids[: rendered.response_spans[0][0]])


def test_a_webshop_chat_teaches_the_webshop_tool(chat: ChatFormat, episode: ExpertEpisode):
    shop = env_protocol("webshop")
    rendered = render_episode(shop.chat(chat), episode, protocol=shop)
    start, end = rendered.response_spans[0]
    text = decode(chat, rendered.token_ids[start:end])
    assert text == format_tool_call(episode.turns[0].action, WEBSHOP_STEP) + "<|im_end|>"
    assert "webshop_step" in decode(chat, rendered.token_ids[:start])


def test_false_beliefs_are_rejected_and_the_expert_thinks_afresh_after_them(
    chat: ChatFormat, episode: ExpertEpisode
):
    import re

    plain = render_episode(chat, episode)
    noisy = seeded(chat, episode, seed=1, false_belief_rate=0.99)
    text = decode(chat, noisy.token_ids)
    attempts = re.findall(
        r'"action": "([^"]+)"\}\}\n</tool_call><\|im_end\|>\n<\|im_start\|>user\n'
        r"<tool_response>\nNothing happens",
        text,
    )
    assert len(attempts) >= 4  # nearly every one of the 5 expert turns
    room = ("countertop 1", "drawer 1", "sinkbasin 1")
    for action in attempts:  # an absent apple taken at the countertop, or a receptacle the room lacks
        taken = re.fullmatch(r"take apple [23] from countertop 1", action)
        phantom = re.fullmatch(r"go to ([a-z]+ 1)", action)
        assert taken or (phantom and phantom.group(1) not in room), action
    phantom_thought = re.search(r"unsearched: ([a-z]+ 1) countertop 1 drawer 1 sinkbasin 1\.", text)
    assert phantom_thought and phantom_thought.group(1) not in room
    # the expert's turns, supervised, are exactly the plain rendering's: the true belief again
    assert texts(chat, noisy, noisy.response_spans) == texts(chat, plain, plain.response_spans)
    # the false beliefs acted on are exactly the listed mistakes
    mistaken = texts(chat, noisy, noisy.mistake_spans)
    assert len(mistaken) == len(attempts)
    assert all(f'"action": "{action}"' in m for m, action in zip(mistaken, attempts, strict=True))
    assert render_episode(chat, episode, think=False, false_belief_rate=0.99) == render_episode(
        chat, episode, think=False
    )


def test_drifted_goals_are_context_and_the_next_expert_turn_restates_the_true_goal(
    chat: ChatFormat, episode: ExpertEpisode
):
    import re

    plain = render_episode(chat, episode)
    drifted = seeded(chat, episode, seed=2, goal_drift_rate=0.99)
    text = decode(chat, drifted.token_ids)
    goals = re.findall(r"<think>\n?(.*?)\. holding:", text)
    assert goals[0] == "put apple in drawer 1"  # the first turn never drifts
    wrong = [g for g in goals if g != "put apple in drawer 1"]
    assert len(wrong) >= 3 and all(g.startswith("put ") for g in wrong)
    # the drifted turns are not targets; every supervised response is the plain rendering's
    supervised = texts(chat, drifted, drifted.response_spans)
    plain_spans = texts(chat, plain, plain.response_spans)
    assert len(supervised) == len(plain_spans) - len(wrong)
    assert all(s in plain_spans and "put apple in drawer 1." in s for s in supervised)
    # the drifted turns are the listed mistakes, so no loss teaches them
    listed = [
        re.search(r"<think>\n?(.*?)\. holding:", t) for t in texts(chat, drifted, drifted.mistake_spans)
    ]
    assert [m.group(1) for m in listed if m] == wrong
    assert render_episode(chat, episode, think=False, goal_drift_rate=0.99) == render_episode(
        chat, episode, think=False
    )


def test_a_task_reminder_renders_every_observation_as_play_does(chat: ChatFormat, episode: ExpertEpisode):
    rendered = render_episode(chat, episode, remind_task=True)
    reminder = task_reminder(episode.start)
    assert reminder is not None and reminder.startswith("Your task is to: ")
    turns: list[tuple[str, str | None]] = [
        (format_response(t.action, thought), step_observation(t.result, reminder=reminder))
        for t, thought in zip(episode.turns, expert_thoughts(episode), strict=True)
    ]
    turns[-1] = (turns[-1][0], None)
    assert decode(chat, rendered.token_ids) == chat.full_text(first_user_message(episode.start), turns)
    plain = render_episode(chat, episode)
    assert texts(chat, rendered, rendered.response_spans) == texts(chat, plain, plain.response_spans)
    # inserted mistakes are answered with the reminder too: the opening states the task once, then
    # every observation but the last (never shown) and every rejection restate it
    mistaken = seeded(chat, episode, remind_task=True, reject_rate=1.0, seed=3)
    assert mistaken.mistake_spans
    expected = 1 + (len(episode.turns) - 1) + len(mistaken.mistake_spans)
    assert decode(chat, mistaken.token_ids).count(reminder) == expected


def test_new_token_spans_are_what_a_diff_inserts_or_replaces_and_where_it_skips():
    assert new_token_spans([], [7, 8], 10) == [(10, 12)]
    assert new_token_spans([1, 2, 3, 4, 5], [1, 2, 9, 4, 5, 6], 100) == [(102, 103), (105, 106)]
    assert new_token_spans([1, 2, 3, 4], [1, 3, 4], 0) == [(1, 2)]  # 2 crossed off: 3 follows 1
    assert new_token_spans([1, 2, 3], [1, 2, 3], 5) == []


def _is_subsequence(part: list[int], whole: list[int]) -> bool:
    remaining = iter(whole)
    return all(token in remaining for token in part)


def test_novel_spans_mark_what_a_response_does_not_copy_from_the_one_before(
    chat: ChatFormat, episode: ExpertEpisode
):
    plain = render_episode(chat, episode)
    marked = render_episode(chat, episode, novel=True)
    assert plain.novel_spans == []
    assert (marked.token_ids, marked.response_spans) == (plain.token_ids, plain.response_spans)
    assert marked.novel_spans == sorted(marked.novel_spans)
    novel = {t for a, b in marked.novel_spans for t in range(a, b)}
    spans = marked.response_spans
    assert set(range(*spans[0])) <= novel  # the first response copies nothing
    for (previous_start, previous_end), (start, end) in itertools.pairwise(spans):
        copied = [marked.token_ids[t] for t in range(start, end) if t not in novel]
        assert _is_subsequence(copied, marked.token_ids[previous_start:previous_end])
        assert 0 < sum(t in novel for t in range(start, end)) < (end - start) / 2
    assert all(any(a <= t < b for a, b in spans) for t in novel)


def test_after_an_inserted_mistake_novelty_is_against_the_mistake(chat: ChatFormat, episode: ExpertEpisode):
    marked = seeded(chat, episode, reject_rate=0.99, seed=3, novel=True)
    assert marked.mistake_spans
    novel = {t for a, b in marked.novel_spans for t in range(a, b)}
    for mistake_start, mistake_end in marked.mistake_spans:
        start, end = next((a, b) for a, b in marked.response_spans if a > mistake_end)
        copied = [marked.token_ids[t] for t in range(start, end) if t not in novel]
        assert _is_subsequence(copied, marked.token_ids[mistake_start:mistake_end])
