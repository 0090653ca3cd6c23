"""Per-env agent protocol: which tool and system prompt the chat shows, how responses parse into
gateway actions, how an expert action is written as a response, and whether observations list
the admissible actions.

Household envs (alfworld, textworld) use the one-tool ``alfworld_step`` protocol of
``agent.tool_calls``; the `search` env uses ``envs.search.protocol`` and `webshop` ``envs.webshop.protocol``.

Pure module.
"""

from collections.abc import Callable
from dataclasses import dataclass, replace

from services.agent.chat_format import ALFWORLD_SYSTEM_PROMPT, ChatFormat
from services.agent.tool_calls import (
    ALFWORLD_STEP,
    WEBSHOP_STEP,
    ParseResult,
    ToolSpec,
    format_response,
    parse_response,
)
from services.envs.search.protocol import (
    SEARCH_SYSTEM_PROMPT,
    SEARCH_TOOL,
    format_search_response,
    parse_search_response,
)
from services.envs.webshop.protocol import format_webshop_response, parse_webshop_response


@dataclass(frozen=True)
class EnvProtocol:
    tool: ToolSpec
    system_prompt: str
    parse: Callable[[str], ParseResult]
    respond: Callable[[str, str | None], str]
    list_actions: bool

    def chat(self, base: ChatFormat) -> ChatFormat:
        """``base`` (its tokenizer) showing this protocol's tool and system prompt."""
        return replace(base, tool=self.tool, system_prompt=self.system_prompt)


HOUSEHOLD_PROTOCOL = EnvProtocol(
    tool=ALFWORLD_STEP,
    system_prompt=ALFWORLD_SYSTEM_PROMPT,
    parse=lambda text: parse_response(text, ALFWORLD_STEP),
    respond=lambda action, thought: format_response(action, thought, ALFWORLD_STEP),
    list_actions=True,
)
# Search observations are passages; the two action forms are in the prompt, not listed each turn.
SEARCH_PROTOCOL = EnvProtocol(
    tool=SEARCH_TOOL,
    system_prompt=SEARCH_SYSTEM_PROMPT,
    parse=parse_search_response,
    respond=format_search_response,
    list_actions=False,
)
WEBSHOP_SYSTEM_PROMPT = (
    "You are an AI agent shopping on a website with the webshop_step tool. Find the product the "
    "instruction asks for (type, attributes, options, price): search[<keywords>] on the search page, "
    "click[<button>] to open a product, choose its options and finally click[Buy Now]. Think step by "
    "step inside <think></think>, then call the tool exactly once per turn."
)
# WebShop pages list their clickable buttons; the admissible actions are listed as for household games.
WEBSHOP_PROTOCOL = EnvProtocol(
    tool=WEBSHOP_STEP,
    system_prompt=WEBSHOP_SYSTEM_PROMPT,
    parse=parse_webshop_response,
    respond=format_webshop_response,
    list_actions=True,
)


def env_protocol(env: str) -> EnvProtocol:
    """The protocol of an env backend by name."""
    match env:
        case "search":
            return SEARCH_PROTOCOL
        case "webshop":
            return WEBSHOP_PROTOCOL
        case "alfworld" | "textworld":
            return HOUSEHOLD_PROTOCOL
        case _:
            raise ValueError(f"no agent protocol for env {env!r}")
