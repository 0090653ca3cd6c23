import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.agent.tool_calls import (
    ALFWORLD_STEP,
    ParsedAction,
    ParseFailure,
    ToolSpec,
    format_response,
    format_tool_call,
    inadmissible_action_feedback,
    parse_response,
)


def call(body: object) -> str:
    return f"<tool_call>\n{json.dumps(body)}\n</tool_call>"


def test_response_with_thought_parses_to_action_and_thought():
    text = format_response("take mug 1 from countertop 1", "The mug is on the countertop.")
    assert text == (
        "<think>\nThe mug is on the countertop.\n</think>\n\n<tool_call>\n"
        '{"name": "alfworld_step", "arguments": {"action": "take mug 1 from countertop 1"}}\n</tool_call>'
    )
    assert parse_response(text) == ParsedAction(
        "take mug 1 from countertop 1", "The mug is on the countertop."
    )


def test_response_without_thought_and_with_surrounding_text_parses():
    text = "I will look around.\n" + format_tool_call("look") + "\n"
    assert parse_response(text) == ParsedAction("look", None)


@given(
    action=st.text(min_size=1).filter(lambda s: s.strip() != ""),
    thought=st.none() | st.text().filter(lambda s: "</think>" not in s and "<tool_call>" not in s),
)
def test_any_action_round_trips_through_the_format(action: str, thought: str | None):
    parsed = parse_response(format_response(action, thought))
    assert isinstance(parsed, ParsedAction)
    assert parsed.action == action
    assert parsed.thought == (None if thought is None else thought.strip())


def test_arguments_given_as_a_json_string_are_accepted():
    text = call({"name": "alfworld_step", "arguments": json.dumps({"action": "open fridge 1"})})
    assert parse_response(text) == ParsedAction("open fridge 1")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("go to countertop 1", "no_tool_call"),
        ("<think>\nhmm, where is it", "unclosed_think"),
        ('<tool_call>\n{"name": "alfworld_step", "arguments": {"action": "look"}}', "no_tool_call"),
        (format_tool_call("look") + format_tool_call("inventory"), "multiple_tool_calls"),
        ("<tool_call>\n{'name': 'alfworld_step'}\n</tool_call>", "bad_json"),
        (call(["alfworld_step", "look"]), "bad_json"),
        (call({"name": "alfworld_step"}), "bad_json"),
        (call({"name": "webshop_step", "arguments": {"action": "look"}}), "wrong_tool"),
        (call({"name": "alfworld_step", "arguments": {}}), "bad_arguments"),
        (call({"name": "alfworld_step", "arguments": {"action": "look", "x": 1}}), "bad_arguments"),
        (call({"name": "alfworld_step", "arguments": {"action": 3}}), "bad_arguments"),
        (call({"name": "alfworld_step", "arguments": {"action": "  "}}), "bad_arguments"),
        (call({"name": "alfworld_step", "arguments": "not json"}), "bad_arguments"),
    ],
)
def test_malformed_responses_become_typed_failures_with_feedback(text: str, kind: str):
    result = parse_response(text)
    assert isinstance(result, ParseFailure)
    assert result.kind == kind
    assert result.feedback.startswith(f"Invalid tool call: {result.detail}.")
    assert format_tool_call("...").replace("\n", " ") in result.feedback


def test_the_parser_serves_other_single_argument_tools():
    webshop = ToolSpec(name="webshop_step", description="Act on the shop page.")
    text = call({"name": "webshop_step", "arguments": {"action": "click[Buy Now]"}})
    assert parse_response(text, webshop) == ParsedAction("click[Buy Now]")
    failure = parse_response(call({"name": "alfworld_step", "arguments": {"action": "x"}}), webshop)
    assert isinstance(failure, ParseFailure) and failure.kind == "wrong_tool"
    assert '"name": "webshop_step"' in failure.feedback


def test_tool_schema_is_an_openai_function_with_one_required_string():
    schema = ALFWORLD_STEP.json_schema()
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "alfworld_step"
    params = schema["function"]["parameters"]
    assert params["required"] == ["action"]
    assert params["properties"]["action"]["type"] == "string"


def test_inadmissible_feedback_is_alfworlds_nothing_happens_plus_the_admissible_list():
    text = inadmissible_action_feedback(" fly to the moon ", ["look", "inventory"])
    assert text == (
        'Nothing happens. "fly to the moon" is not an admissible action here. '
        "Admissible actions: look, inventory."
    )
    assert inadmissible_action_feedback("fly") == 'Nothing happens. "fly" is not an admissible action here.'
