"""WebShop responses: spaced inside the bracket for the model, canonical for the gateway."""

from pathlib import Path

import pytest

from services.agent.tool_calls import WEBSHOP_STEP, ParsedAction, ParseFailure, format_tool_call
from services.envs.webshop.protocol import (
    canonical_action,
    format_webshop_response,
    parse_webshop_response,
    spaced_action,
)
from services.models.loading import load_tokenizer


@pytest.mark.parametrize(
    ("action", "canonical"),
    [
        ("click[ Buy Now]", "click[Buy Now]"),
        ("  CLICK [  16 fl   oz ] ", "click[16 fl oz]"),
        ("search[ shampoo anti dandruff]", "search[shampoo anti dandruff]"),
        ("search[]", "search[]"),  # empty: left for the gateway to reject
        ("buy it", "buy it"),
    ],
)
def test_canonical_action_folds_the_brackets_spacing(action: str, canonical: str):
    assert canonical_action(action) == canonical


def test_responses_are_spaced_and_parse_back_to_the_canonical_action():
    assert spaced_action("click[Buy Now]") == "click[ Buy Now]"
    assert spaced_action("search[ a  b ]") == "search[ a b]"
    response = format_webshop_response("click[lavender]", "the scent")
    assert '"action": "click[ lavender]"' in response and "<think>\nthe scent\n</think>" in response
    assert parse_webshop_response(response) == ParsedAction(action="click[lavender]", thought="the scent")
    # the paper's unspaced form is accepted as is
    unspaced = format_tool_call("click[Buy Now]", WEBSHOP_STEP)
    assert parse_webshop_response(unspaced) == ParsedAction(action="click[Buy Now]", thought=None)
    failure = parse_webshop_response("I would buy it")
    assert isinstance(failure, ParseFailure) and failure.kind == "no_tool_call"
    assert "webshop_step" in failure.feedback


def test_a_spaced_response_copies_the_pages_tokens(zoo_cache: Path):
    tokenizer = load_tokenizer("student", zoo_cache)
    page = tokenizer.tokenize("[SEP] lavender [SEP] B0EH6156JF [SEP]")
    for word in ("lavender", "B0EH6156JF"):
        spaced = tokenizer.tokenize(format_webshop_response(f"click[{word}]"))
        plain = tokenizer.tokenize(format_tool_call(f"click[{word}]", WEBSHOP_STEP))
        written = tokenizer.tokenize(f" {word}")
        assert _contains(page, written) and _contains(spaced, written)
        assert not _contains(plain, written)


def _contains(tokens: list[str], part: list[str]) -> bool:
    return any(tokens[i : i + len(part)] == part for i in range(len(tokens) - len(part) + 1))
