"""How the agent talks to the `search` env (paper, Appendix "Multi-Hop Search"; Search-R1).

A response is optional ``<think>`` reasoning, then exactly one of:

* a call of the ``search`` tool, ``<tool_call>{"name": "search", "arguments": {"query": "..."}}</tool_call>``,
* the text channel ``<search> query </search>``,
* the final answer ``<answer> ... </answer>``.

Searches become the gateway action ``search[query]`` and answers ``answer[text]``; a response with
none or several of them, or with a malformed tool call, is a ParseFailure whose feedback says
how to search and how to answer (the search is not run, the turn is spent).

Pure module: standard library and the other pure agent modules only.
"""

import re

from services.agent.tool_calls import (
    THINK_CLOSE,
    THINK_OPEN,
    TOOL_CALL_OPEN,
    ParsedAction,
    ParseFailure,
    ParseFailureKind,
    ParseResult,
    ToolSpec,
    format_tool_call,
    parse_response,
)
from services.envs.search.actions import MAX_ARGUMENT_CHARS, answer_action, parse_action, search_action

SEARCH_TOOL = ToolSpec(
    name="search",
    description="Search the encyclopedia and return the top passages as <information>Doc i(Title: ...) ...</information>.",
    argument="query",
    argument_description="What to look up, e.g. the name of the person, place, company or work you need.",
)
SEARCH_SYSTEM_PROMPT = (
    "You are an AI agent answering questions with a search engine. Think step by step inside "
    "<think></think>; search with the search tool (one call per turn, or <search> query </search>); "
    "when you know the answer, reply with <answer> the answer </answer>."
)
_TAGS = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)


def _failure(kind: ParseFailureKind, detail: str) -> ParseFailure:
    example = format_tool_call("...", SEARCH_TOOL).replace("\n", " ")
    feedback = (
        f"Invalid response: {detail}. To search, call the tool once ({example}) or write "
        "<search> query </search>; to give the final answer, write <answer> answer </answer>."
    )
    return ParseFailure(kind=kind, detail=detail, feedback=feedback)


def _split_thought(text: str) -> tuple[str | None, str] | ParseFailure:
    stripped = text.lstrip()
    if not stripped.startswith(THINK_OPEN):
        return None, text
    end = stripped.find(THINK_CLOSE)
    if end < 0:
        return _failure("unclosed_think", f"{THINK_OPEN} is never closed with {THINK_CLOSE}")
    return stripped[len(THINK_OPEN) : end].strip(), stripped[end + len(THINK_CLOSE) :]


def parse_search_response(text: str) -> ParseResult:
    """A response -> ``ParsedAction('search[...]' | 'answer[...]')``, or a failure with feedback."""
    split = _split_thought(text)
    if isinstance(split, ParseFailure):
        return split
    thought, rest = split
    tags = _TAGS.findall(rest)
    calls = rest.count(TOOL_CALL_OPEN)
    if len(tags) + calls == 0:
        return _failure("no_tool_call", "no search tool call, <search> or <answer> found")
    if len(tags) + calls > 1:
        return _failure(
            "multiple_tool_calls", f"{len(tags) + calls} actions found; take exactly one per turn"
        )
    if calls:
        parsed = parse_response(rest, SEARCH_TOOL)
        if isinstance(parsed, ParseFailure):
            return _failure(parsed.kind, parsed.detail)
        kind, argument = "search", parsed.action
    else:
        kind, argument = tags[0]
    if not argument.strip():
        return _failure("bad_arguments", f"the {kind} is empty")
    if len(argument) > MAX_ARGUMENT_CHARS:
        return _failure("bad_arguments", f"the {kind} is longer than {MAX_ARGUMENT_CHARS} characters")
    action = search_action(argument) if kind == "search" else answer_action(argument)
    return ParsedAction(action=action, thought=thought)


def format_search_response(action: str, thought: str | None = None) -> str:
    """The response that takes a gateway action: ``<search> query </search>`` or ``<answer> ... </answer>``.

    Both use Search-R1's text channels, with the argument between spaces: a name copied from the
    question or a passage (`` Kessrow``, space-led there) is then the same tokens in the response.
    Inside a tool call's JSON (``"query": "Kessrow"``) the first word has no space before it and a
    byte-level BPE splits it differently, so a small model would have to learn every name twice.
    A query holding ``<`` (markup) is sent as a tool call.
    """
    kind, argument = parse_action(action)
    if kind == "search":
        # a query holding markup would close the channel early: it travels as a tool call instead
        body = (
            format_tool_call(argument, SEARCH_TOOL) if "<" in argument else f"<search> {argument} </search>"
        )
    else:
        body = f"<answer> {argument} </answer>"
    return body if thought is None else f"{THINK_OPEN}\n{thought.strip()}\n{THINK_CLOSE}\n\n{body}"
