import itertools
from pathlib import Path

import pytest

from services.agent.chat_format import (
    ALFWORLD_SYSTEM_PROMPT,
    ChatFormat,
    Conversation,
    end_of_turn_id,
    format_observation,
    task_message,
)
from services.agent.tool_calls import format_response, inadmissible_action_feedback, parse_response
from services.errors import ConflictError, InputError
from services.models.loading import load_tokenizer

OBJECTIVE = "Your task is to: put a clean mug in coffeemachine."
FIRST_OBS = (
    "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, "
    "you see a cabinet 1, a coffeemachine 1, a countertop 1, and a sinkbasin 1."
)
TURNS = [
    (
        format_response("go to countertop 1", "The mug is likely on the countertop."),
        "On the countertop 1, you see a mug 1.",
    ),
    (
        format_response("take mug 1 from countertop 1", "There it is."),
        "You pick up the mug 1 from the countertop 1.",
    ),
    (
        "<think>\nI should clean it.\n</think>\n\nclean the mug",
        inadmissible_action_feedback("clean", ["look"]),
    ),
    (format_response("clean mug 1 with sinkbasin 1"), None),
]


@pytest.fixture(scope="module")
def chat(zoo_cache: Path) -> ChatFormat:
    return ChatFormat(load_tokenizer("teacher", zoo_cache))


def play(chat: ChatFormat) -> tuple[Conversation, list[list[int]]]:
    """Replay TURNS, recording the ids after every append."""
    conversation = chat.start(task_message(OBJECTIVE, FIRST_OBS))
    snapshots = [conversation.token_ids]
    for response, observation in TURNS:
        conversation.add_response_text(response)
        snapshots.append(conversation.token_ids)
        if observation is not None:
            conversation.add_observation(observation)
            snapshots.append(conversation.token_ids)
    return conversation, snapshots


def test_prompt_holds_system_prompt_tool_schema_task_and_ends_with_generation_prompt(chat: ChatFormat):
    text = chat.prompt_text(task_message(OBJECTIVE, FIRST_OBS))
    assert text.startswith("<|im_start|>system\n" + ALFWORLD_SYSTEM_PROMPT)
    assert '"name": "alfworld_step"' in text
    assert f"<|im_start|>user\n{OBJECTIVE}\n\n{FIRST_OBS}<|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_observation_text_closes_the_response_and_opens_the_next_one(chat: ChatFormat):
    assert chat.observation_text("You see nothing.") == (
        "\n<|im_start|>user\n<tool_response>\nYou see nothing.\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_appending_turns_never_changes_earlier_ids(chat: ChatFormat):
    _, snapshots = play(chat)
    for before, after in itertools.pairwise(snapshots):
        assert len(after) > len(before)
        assert after[: len(before)] == before


def test_incremental_ids_equal_tokenising_the_whole_rendered_conversation(chat: ChatFormat):
    conversation, _ = play(chat)
    full = chat.full_text(task_message(OBJECTIVE, FIRST_OBS), TURNS)
    assert conversation.token_ids == chat.tokenizer.encode(full, add_special_tokens=False)


def test_spans_cover_exactly_the_responses_and_their_end_of_turn(chat: ChatFormat):
    conversation, _ = play(chat)
    eot = end_of_turn_id(chat.tokenizer)
    assert conversation.num_turns == len(TURNS)
    ids = conversation.token_ids
    for turn, ((start, end), (response, _)) in enumerate(
        zip(conversation.response_spans, TURNS, strict=True)
    ):
        assert ids[end - 1] == eot
        assert conversation.response_text(ids[start:end]) == response
        assert conversation.response_ids(turn) == ids[start:end]
        assert ids[start - 3 : start] == chat.tokenizer.encode(
            "<|im_start|>assistant\n", add_special_tokens=False
        )
    supervised = {i for start, end in conversation.response_spans for i in range(start, end)}
    assert min(supervised) >= conversation.prompt_length
    # Everything outside the spans is template or observation text.
    assert len(supervised) == sum(end - start for start, end in conversation.response_spans)


def test_decoded_responses_parse_back_to_their_actions(chat: ChatFormat):
    conversation, _ = play(chat)
    actions = [parse_response(conversation.response_text(conversation.response_ids(t))) for t in range(4)]
    assert [getattr(a, "action", None) for a in actions] == [
        "go to countertop 1",
        "take mug 1 from countertop 1",
        None,
        "clean mug 1 with sinkbasin 1",
    ]


def test_a_cut_off_response_gets_an_end_of_turn_outside_its_span(chat: ChatFormat):
    conversation = chat.start(task_message(OBJECTIVE, FIRST_OBS))
    cut = chat.tokenizer.encode("<think>\nI will", add_special_tokens=False)
    start, end = conversation.add_response_ids(cut)
    assert conversation.token_ids[start:end] == cut
    assert conversation.token_ids[end:] == [end_of_turn_id(chat.tokenizer)]
    conversation.add_observation("Nothing happens.")
    assert conversation.awaiting_response


def test_an_observation_that_would_not_fit_is_not_appended(chat: ChatFormat):
    conversation = chat.start(task_message(OBJECTIVE, FIRST_OBS))
    conversation.add_response_text(format_response("look"))
    before = conversation.token_ids
    shown = len(chat.tokenizer.encode(chat.observation_text("Nothing happens."), add_special_tokens=False))
    assert not conversation.add_observation("Nothing happens.", max_length=len(before) + shown - 1)
    assert conversation.token_ids == before and not conversation.awaiting_response
    assert conversation.add_observation("Nothing happens.", max_length=len(before) + shown)
    assert len(conversation) == len(before) + shown and conversation.awaiting_response


def test_turns_must_alternate_response_then_observation(chat: ChatFormat):
    conversation = chat.start(task_message(OBJECTIVE, FIRST_OBS))
    with pytest.raises(ConflictError):
        conversation.add_observation("too early")
    conversation.add_response_text(format_response("look"))
    with pytest.raises(ConflictError):
        conversation.add_response_text(format_response("look"))
    with pytest.raises(InputError):
        chat.start("x").add_response_ids([])


def test_observation_formatting_appends_admissible_actions():
    assert format_observation(" You see a mug 1. ", ["look", "take mug 1 from desk 1"]) == (
        "You see a mug 1.\nAdmissible actions: look, take mug 1 from desk 1."
    )
    assert format_observation("You see a mug 1.") == "You see a mug 1."
