"""How the agent talks to the `webshop` env (paper, Appendix "WebShop"): one ``webshop_step`` tool
call per turn whose ``action`` is ``search[<keywords>]`` or ``click[<button>]``.

Responses written for the model (the expert's, in teacher training) put a space after the
bracket: ``{"action": "click[ lavender]"}``. A byte-level BPE splits a word that follows ``[``
differently from the same word after a space, and every word the agent types (keywords from the
instruction, option values and product ids from the page) is space-led where the model reads it;
with the space, the response copies the page's own tokens. Parsing folds the bracket's spacing
back (``click[lavender]``), so the gateway and the trajectory only ever see the canonical action,
and a response without the space is accepted just the same.

Pure module: the other pure agent modules and the shop's action grammar only.
"""

from services.agent.tool_calls import (
    WEBSHOP_STEP,
    ParsedAction,
    ParseResult,
    format_response,
    parse_response,
)
from services.envs.webshop.shop import parse_action


def canonical_action(action: str) -> str:
    """``verb[text]`` with the verb in lower case and the text's spacing collapsed (the shop's own
    reading, ``shop.parse_action``); any other string unchanged (the gateway's validation then
    says what is wrong with it)."""
    parsed = parse_action(action)
    return action if parsed is None else f"{parsed[0]}[{parsed[1]}]"


def spaced_action(action: str) -> str:
    """The action as responses write it: ``click[Buy Now]`` -> ``click[ Buy Now]``."""
    parsed = parse_action(action)
    return action if parsed is None else f"{parsed[0]}[ {parsed[1]}]"


def format_webshop_response(action: str, thought: str | None = None) -> str:
    """The response that takes ``action``: optional ``<think>``, then the tool call (spaced)."""
    return format_response(spaced_action(action), thought, WEBSHOP_STEP)


def parse_webshop_response(text: str) -> ParseResult:
    """A response -> ``ParsedAction`` with the canonical action, or the tool-call failure."""
    parsed = parse_response(text, WEBSHOP_STEP)
    if isinstance(parsed, ParsedAction):
        return ParsedAction(action=canonical_action(parsed.action), thought=parsed.thought)
    return parsed
