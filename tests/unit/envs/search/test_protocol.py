"""The search env's response protocol: tool call, <search> and <answer> channels, and rejections."""

import pytest

from services.agent.tool_calls import ParsedAction, ParseFailure
from services.contracts.action_templates import fill_template, match_admissible, template_verb
from services.env_gateway.action_validation import check_action
from services.env_gateway.episode_errors import ActionRejectedError
from services.envs.protocols import HOUSEHOLD_PROTOCOL, SEARCH_PROTOCOL, env_protocol
from services.envs.search.actions import ADMISSIBLE
from services.envs.search.protocol import format_search_response, parse_search_response


@pytest.mark.parametrize(
    ("response", "action", "thought"),
    [
        (
            '<tool_call>\n{"name": "search", "arguments": {"query": "Kessrow"}}\n</tool_call>',
            "search[Kessrow]",
            None,
        ),
        (
            "<think>\nWho wrote it?\n</think>\n\n<search> Vorn  Press </search>",
            "search[Vorn Press]",
            "Who wrote it?",
        ),
        ("<think>I know it.</think><answer> Kessrow </answer>", "answer[Kessrow]", "I know it."),
        (
            '<tool_call>{"name": "search", "arguments": "{\\"query\\": \\"a b\\"}"}</tool_call>',
            "search[a b]",
            None,
        ),
        (
            "<think><answer> not this </answer></think> <search>q</search>",
            "search[q]",
            "<answer> not this </answer>",
        ),
    ],
)
def test_responses_become_gateway_actions(response: str, action: str, thought: str | None):
    assert parse_search_response(response) == ParsedAction(action=action, thought=thought)


@pytest.mark.parametrize(
    ("response", "kind", "detail"),
    [
        ("I think the answer is Kessrow.", "no_tool_call", "no search tool call"),
        ("<search>a</search><answer>b</answer>", "multiple_tool_calls", "2 actions"),
        ("<think>unclosed <answer>x</answer>", "unclosed_think", "never closed"),
        ("<answer>   </answer>", "bad_arguments", "the answer is empty"),
        ("<search>" + "x" * 401 + "</search>", "bad_arguments", "longer than 400"),
        (
            '<tool_call>{"name": "alfworld_step", "arguments": {"action": "look"}}</tool_call>',
            "wrong_tool",
            "only tool",
        ),
        ('<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>', "bad_arguments", '"query"'),
    ],
)
def test_malformed_responses_get_feedback(response: str, kind: str, detail: str):
    failure = parse_search_response(response)
    assert isinstance(failure, ParseFailure) and failure.kind == kind and detail in failure.detail
    assert (
        failure.feedback.startswith("Invalid response: ") and "<answer> answer </answer>" in failure.feedback
    )


def test_expert_responses_parse_back_to_their_action():
    for action in ("search[Vorn Press]", "answer[1954]", "search[a </tool_call> b]", "search[a </search> b]"):
        for thought in (None, "Next hop."):
            parsed = parse_search_response(format_search_response(action, thought))
            assert parsed == ParsedAction(action=action, thought=thought)
    assert format_search_response("answer[Kessrow]") == "<answer> Kessrow </answer>"
    # searches use the text channel, so a copied name keeps its leading space (same tokens as in
    # the question); a query holding markup cannot, and goes as a tool call
    assert format_search_response("search[Vorn Press]", "Next.") == (
        "<think>\nNext.\n</think>\n\n<search> Vorn Press </search>"
    )
    assert format_search_response("search[a </search> b]").startswith("<tool_call>")


def test_templates_admit_free_text_on_both_sides():
    assert template_verb("search[<query>]") == "search" and template_verb("go to fridge 1") is None
    assert fill_template(" Search [ the  capital ] ", "search[<query>]") == "search[the capital]"
    assert fill_template("search[ ]", "search[<query>]") is None
    assert match_admissible("answer[ Kessrow ]", ADMISSIBLE) == "answer[Kessrow]"
    assert match_admissible("look", ADMISSIBLE) is None
    assert check_action("SEARCH[vorn press]", list(ADMISSIBLE)) == "search[vorn press]"
    with pytest.raises(ActionRejectedError, match="not admissible"):
        check_action("lookup[x]", list(ADMISSIBLE))
    assert check_action("Go to Fridge 1", ["go to fridge 1"]) == "go to fridge 1"  # household unchanged


def test_protocol_by_env():
    assert env_protocol("search") is SEARCH_PROTOCOL and not SEARCH_PROTOCOL.list_actions
    assert env_protocol("alfworld") is env_protocol("textworld") is HOUSEHOLD_PROTOCOL
    with pytest.raises(ValueError, match="no agent protocol"):
        env_protocol("nethack")
