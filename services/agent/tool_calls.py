"""Tool calls: the one environment tool, the response format, the parser, client-side rejection.

One turn is the model's response followed by the tool's observation (paper, Appendix
"Environments, Tool Configurations, And Task Examples"). A response is optional reasoning, then
exactly one tool call in the Qwen3/Hermes format::

    <think>
    The mug is probably on the countertop.
    </think>

    <tool_call>
    {"name": "alfworld_step", "arguments": {"action": "go to countertop 1"}}
    </tool_call>

Client-side validation, as in the paper, happens before anything reaches the environment:

* a response that does not parse (no or several ``<tool_call>`` blocks, bad JSON, another tool,
  missing or non-string ``action``, an unclosed ``<think>``) becomes a ``ParseFailure`` whose
  ``feedback`` ("Invalid tool call: ...") is shown to the model as that turn's observation;
* a parsed action that is not in the current admissible set is answered with
  ``inadmissible_action_feedback`` ("Nothing happens. ..."), ALFWorld's own reply to a command it
  cannot execute, plus the admissible actions. The env gateway would answer such a step with
  HTTP 422, so the rollout worker never sends it.

Turn budget: a rejected response (either kind) still consumes one turn of the episode's turn
budget (``max_turns`` / the controller's ``H_roll``): it is a full turn in the trajectory, with
its response tokens supervised like any other, and the feedback as its observation. It consumes
no environment step: the env gateway never sees it, so the game state and the env's own step
counter are unchanged.

Pure module: standard library only.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"

ParseFailureKind = Literal[
    "unclosed_think", "no_tool_call", "multiple_tool_calls", "bad_json", "wrong_tool", "bad_arguments"
]
# What happened to one turn's response; the rollout worker records it per turn.
TurnOutcome = Literal["stepped", "invalid_tool_call", "inadmissible_action"]


@dataclass(frozen=True)
class ToolSpec:
    """A single-argument environment tool (``alfworld_step(action: str)`` and its siblings)."""

    name: str
    description: str
    argument: str = "action"
    argument_description: str = "The command to execute."

    def json_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI/Qwen function schema (what chat templates render under ``tools``)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {
                        self.argument: {"type": "string", "description": self.argument_description}
                    },
                    "required": [self.argument],
                },
            },
        }


ALFWORLD_STEP = ToolSpec(
    name="alfworld_step",
    description="Execute one household command and return the new observation.",
    argument="action",
    argument_description=(
        "A household command, e.g. 'go to countertop 1', 'take mug 1 from countertop 1', "
        "'put mug 1 in/on coffeemachine 1', 'open fridge 1', 'clean mug 1 with sinkbasin 1', "
        "'examine mug 1', 'inventory', 'look'."
    ),
)

WEBSHOP_STEP = ToolSpec(
    name="webshop_step",
    description="Act on the shopping website and return the new page with its available actions.",
    argument="action",
    argument_description=(
        "'search[<keywords>]' while the search bar is shown, or 'click[<button>]' for a button on the "
        "page, e.g. 'search[long lasting deodorant]', 'click[B0EXAMPLE1]', 'click[x-large]', "
        "'click[Buy Now]'."
    ),
)


@dataclass(frozen=True)
class ParsedAction:
    """A response that parsed: the action string as the model wrote it, and its reasoning if any."""

    action: str
    thought: str | None = None


@dataclass(frozen=True)
class ParseFailure:
    """A response that did not parse; ``feedback`` is the observation the model sees instead."""

    kind: ParseFailureKind
    detail: str
    feedback: str


@dataclass(frozen=True)
class _Problem:
    kind: ParseFailureKind
    detail: str


ParseResult = ParsedAction | ParseFailure


def format_tool_call(action: str, tool: ToolSpec = ALFWORLD_STEP) -> str:
    """The ``<tool_call>`` block carrying ``action`` (compact JSON, as Qwen3 writes it)."""
    payload = json.dumps({"name": tool.name, "arguments": {tool.argument: action}}, ensure_ascii=False)
    # "<\/" is JSON for "</": a closing tag inside the action cannot end the block early.
    payload = payload.replace("</", "<\\/")
    return f"{TOOL_CALL_OPEN}\n{payload}\n{TOOL_CALL_CLOSE}"


def format_response(action: str, thought: str | None = None, tool: ToolSpec = ALFWORLD_STEP) -> str:
    """A full assistant response: optional ``<think>`` reasoning, then the tool call."""
    call = format_tool_call(action, tool)
    if thought is None:
        return call
    return f"{THINK_OPEN}\n{thought.strip()}\n{THINK_CLOSE}\n\n{call}"


def _split_thought(text: str) -> tuple[str | None, str] | _Problem:
    """Separate a leading ``<think>...</think>`` block from the rest of the response."""
    stripped = text.lstrip()
    if not stripped.startswith(THINK_OPEN):
        return None, text
    end = stripped.find(THINK_CLOSE)
    if end < 0:
        return _Problem("unclosed_think", f"{THINK_OPEN} is never closed with {THINK_CLOSE}")
    return stripped[len(THINK_OPEN) : end].strip(), stripped[end + len(THINK_CLOSE) :]


def _tool_call_bodies(text: str) -> list[str] | _Problem:
    """The bodies of all ``<tool_call>...</tool_call>`` blocks, in order."""
    bodies = []
    pos = 0
    while (start := text.find(TOOL_CALL_OPEN, pos)) >= 0:
        end = text.find(TOOL_CALL_CLOSE, start)
        if end < 0:
            return _Problem("no_tool_call", f"{TOOL_CALL_OPEN} is never closed with {TOOL_CALL_CLOSE}")
        bodies.append(text[start + len(TOOL_CALL_OPEN) : end])
        pos = end + len(TOOL_CALL_CLOSE)
    if not bodies:
        return _Problem("no_tool_call", f"no {TOOL_CALL_OPEN} block found")
    if len(bodies) > 1:
        return _Problem("multiple_tool_calls", f"{len(bodies)} tool calls found; call the tool once per turn")
    return bodies


def _action_from_body(body: str, tool: ToolSpec) -> str | _Problem:
    """Decode one tool-call body to the action string it carries."""
    try:
        call = json.loads(body)
    except json.JSONDecodeError as exc:
        return _Problem("bad_json", f"the tool call is not valid JSON ({exc.msg})")
    if not isinstance(call, dict) or "name" not in call or "arguments" not in call:
        return _Problem("bad_json", 'the tool call must be a JSON object with "name" and "arguments"')
    if call["name"] != tool.name:
        return _Problem("wrong_tool", f"unknown tool {call['name']!r}; the only tool is {tool.name!r}")
    arguments = call["arguments"]
    if isinstance(arguments, str):  # OpenAI-style: arguments as a JSON-encoded string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return _Problem("bad_arguments", "the arguments are a string that is not a JSON object")
    if not isinstance(arguments, dict) or set(arguments) != {tool.argument}:
        return _Problem("bad_arguments", f'the arguments must be exactly {{"{tool.argument}": <string>}}')
    action = arguments[tool.argument]
    if not isinstance(action, str) or not action.strip():
        return _Problem("bad_arguments", f'"{tool.argument}" must be a non-empty string')
    return action


def parse_response(text: str, tool: ToolSpec = ALFWORLD_STEP) -> ParseResult:
    """Turn a model response into the action it calls the tool with, or a typed failure.

    A leading ``<think>`` block is optional; text around the single tool call is tolerated.
    """
    split = _split_thought(text)
    if isinstance(split, _Problem):
        return _failure(split, tool)
    thought, rest = split
    bodies = _tool_call_bodies(rest)
    if isinstance(bodies, _Problem):
        return _failure(bodies, tool)
    action = _action_from_body(bodies[0], tool)
    if isinstance(action, _Problem):
        return _failure(action, tool)
    return ParsedAction(action=action, thought=thought)


def _failure(problem: _Problem, tool: ToolSpec) -> ParseFailure:
    example = format_tool_call("...", tool).replace("\n", " ")
    feedback = f"Invalid tool call: {problem.detail}. Respond with exactly one tool call: {example}"
    return ParseFailure(kind=problem.kind, detail=problem.detail, feedback=feedback)


def inadmissible_action_feedback(action: str, admissible: Sequence[str] | None = None) -> str:
    """The observation for a rejected, inadmissible action (ALFWorld's "Nothing happens.")."""
    text = f'Nothing happens. "{action.strip()}" is not an admissible action here.'
    if admissible:
        text += " Admissible actions: " + ", ".join(admissible) + "."
    return text
