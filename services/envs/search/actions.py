"""The search env's two gateway actions, ``search[<query>]`` and ``answer[<answer>]`` (pure).

The agent's `search` tool call, ``<search>`` and ``<answer>`` text channels all become one of these
(``services.envs.search.protocol``); the gateway admits them through the action templates
(``services.contracts.action_templates``).
"""

import re
from typing import Literal

SEARCH_TEMPLATE = "search[<query>]"
ANSWER_TEMPLATE = "answer[<answer>]"
ADMISSIBLE: tuple[str, ...] = (ANSWER_TEMPLATE, SEARCH_TEMPLATE)
# A query or answer longer than this is refused by the agent's parser (the gateway takes 512 chars).
MAX_ARGUMENT_CHARS = 400

ActionKind = Literal["search", "answer"]
_ACTION = re.compile(r"^(search|answer)\[(.*)\]$", re.DOTALL)


def search_action(query: str) -> str:
    return f"search[{' '.join(query.split())}]"


def answer_action(answer: str) -> str:
    return f"answer[{' '.join(answer.split())}]"


def parse_action(action: str) -> tuple[ActionKind, str]:
    """``'search[x y]'`` -> ``('search', 'x y')``; ValueError for anything else."""
    match = _ACTION.match(action.strip())
    if match is None or not match.group(2).strip():
        raise ValueError(f"not a search env action: {action!r}; use {SEARCH_TEMPLATE} or {ANSWER_TEMPLATE}")
    kind: ActionKind = "search" if match.group(1) == "search" else "answer"
    return kind, " ".join(match.group(2).split())
