"""Free-text actions (WebShop's search[<your keywords>]): admitted by the agent and by the gateway."""

import pytest

from services.agent.tool_calls import WEBSHOP_STEP, format_response, parse_response
from services.contracts.action_templates import (
    MAX_ACTION_CHARS,
    fill_template,
    match_admissible,
    normalize_action,
    template_verb,
)
from services.contracts.env_gateway import StepRequest
from services.env_gateway.action_validation import check_action
from services.env_gateway.episode_errors import ActionRejectedError

SEARCH_PAGE = ["search[<your keywords>]"]
RESULTS_PAGE = ["click[Back to Search]", "click[< Prev]", "click[Next >]", "click[B0ABCDEF12]"]


def test_only_a_lower_case_placeholder_makes_a_template():
    assert template_verb("search[<your keywords>]") == "search"
    assert template_verb("click[< Prev]") is None and template_verb("click[Next >]") is None
    assert template_verb("go to fridge 1") is None


@pytest.mark.parametrize(
    ("action", "filled"),
    [
        ("search[red  running shoes ]", "search[red running shoes]"),
        ("Search [Long Lasting Deodorant]", "search[Long Lasting Deodorant]"),
        ("search[]", None),
        ("search[   ]", None),
        ("click[red shoes]", None),
    ],
)
def test_fill_template(action, filled):
    assert fill_template(action, "search[<your keywords>]") == filled


def test_agent_and_gateway_admit_the_same_actions():
    for admissible in (SEARCH_PAGE, RESULTS_PAGE):
        for action in ("search[vegan lipstick]", "click[b0abcdef12]", "click[next >]", "click[Buy Now]"):
            agent = match_admissible(action, admissible)
            if agent is None:
                with pytest.raises(ActionRejectedError):
                    check_action(action, admissible)
            else:
                assert check_action(action, admissible) == agent
    assert match_admissible("search[vegan lipstick]", SEARCH_PAGE) == "search[vegan lipstick]"
    assert match_admissible("click[b0abcdef12]", RESULTS_PAGE) == "click[B0ABCDEF12]"
    assert match_admissible("search[vegan lipstick]", RESULTS_PAGE) is None


def test_gateway_rejection_of_a_click_names_the_verb():
    with pytest.raises(ActionRejectedError) as info:
        check_action("press[Buy Now]", RESULTS_PAGE)
    assert any("no admissible action starts with 'press'" in p for p in info.value.problems)


def test_webshop_tool_calls_round_trip():
    text = format_response("click[< Prev]", "Wrong colour.", tool=WEBSHOP_STEP)
    assert '"name": "webshop_step"' in text
    parsed = parse_response(text, WEBSHOP_STEP)
    assert parsed.action == "click[< Prev]" and parsed.thought == "Wrong colour."  # type: ignore[union-attr]


def test_a_search_longer_than_the_gateway_takes_is_not_admissible():
    longest = "search[" + "x" * (MAX_ACTION_CHARS - len("search[]")) + "]"
    assert fill_template(longest, SEARCH_PAGE[0]) == longest
    assert StepRequest(action=longest).action == longest
    assert fill_template(longest.replace("x", "xy", 1), SEARCH_PAGE[0]) is None
    assert match_admissible(longest.replace("x", "xy", 1), SEARCH_PAGE) is None


def test_admissible_matching_ignores_case_and_spacing_and_returns_the_env_spelling():
    admissible = ["go to countertop 1", "take mug 1 from countertop 1", "look"]
    assert normalize_action("  Take  Mug 1   from countertop 1 ") == "take mug 1 from countertop 1"
    assert match_admissible("TAKE mug 1 from  countertop 1", admissible) == "take mug 1 from countertop 1"
    assert match_admissible("take mug 2 from countertop 1", admissible) is None
