"""Tokenizer training text: ALFWorld-like household text synthesised offline, plus the chat format.

The ``alfworld`` wheel ships the game's vocabulary (``alfworld/gen/constants.py``), the task
templates (``alfworld/gen/goal_library.py``) and the text grammar of every observation
(``alfworld/data/alfred.twl2``); this module fills those templates with random objects and
receptacles. It is only the default source: the tokenizer builder takes any iterable of strings,
so real observations (e.g. logged by the env gateway) can replace or extend it.
"""

import json
import random
import re
from collections.abc import Iterator
from functools import cache
from importlib import resources

from services.agent.chat_format import ALFWORLD_SYSTEM_PROMPT, format_observation, task_message
from services.agent.tool_calls import (
    ALFWORLD_STEP,
    ParseFailure,
    ToolSpec,
    format_response,
    format_tool_call,
    inadmissible_action_feedback,
    parse_response,
)

_RHS = re.compile(r'"rhs":\s*"((?:[^"\\]|\\.)*)"')
_LIST_EXPR = re.compile(r"\[\{[^\]]*\}\]")
_REFERENCE = re.compile(r"#[A-Za-z_.()-]+#")
_NAME = re.compile(r"\{[a-z0-9]+\.name(?: or [a-z0-9]+\.id)?\}")
_INDEFINITE = re.compile(r"\{[a-z0-9]+\.indefinite\}")

_THOUGHTS = (
    "I need to find {a} {obj}. I have not checked the {recep} yet, so I will go there.",
    "The {obj} is not here. Next I will check the {recep}.",
    "I found the {obj} on the {recep}. Now I take it.",
    "The {recep} is closed. I should open it to look inside.",
    "I am carrying the {obj}. I need to {verb} it with the {appliance} first.",
    "The {obj} is {state} now, so I can put it in/on the {recep}.",
    "My task is to {task}. First I look for the {obj}.",
    "I already checked the {recep} and there was no {obj}. Let me try another place.",
    "Nothing happened, so that action was not valid. I should pick an admissible action.",
    "I need a second {obj}. The first one is done; I will search the {recep} again.",
    "To look at the {obj} under the light, I should turn on the {lamp}.",
    "A {obj} may be in the {recep}; it is usually kept there, so that is probably the best place to look.",
    "I still have not found it. Maybe it is inside something that is closed, which I could open.",
    "Where could the {obj} be? It might be on the {recep}, or else somewhere I have not searched yet.",
    "Done: the {obj} is in place, the goal should be complete after this step.",
    "I remember seeing {a} {obj} before, when I went to the {recep}. I will go back there now.",
)
_STATES = (("clean", "clean", "sinkbasin"), ("heat", "hot", "microwave"), ("cool", "cool", "fridge"))


@cache
def _vocabulary() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(objects, receptacles, task templates, grammar right-hand sides), all ALFWorld's own text."""
    from alfworld.gen import constants, goal_library

    objects = tuple(sorted({name.lower() for name in constants.OBJECTS}))
    receptacles = tuple(sorted({name.lower() for name in constants.RECEPTACLES}))
    tasks = tuple(t for goal in goal_library.gdict.values() for t in goal["templates"])
    grammar = resources.files("alfworld").joinpath("data/alfred.twl2").read_text()
    rhs = tuple(json.loads(f'"{m}"') for m in _RHS.findall(grammar))
    return objects, receptacles, tasks, rhs


def household_entity_tokens(max_number: int) -> list[str]:
    """Every household entity name with its instance number, space-led (``" drawer 3"``), for the
    tokenizer: ALFWorld's object and receptacle names x instances ``1..max_number`` (0: none).

    Names are sorted and numbers ascend, so the list (and the ids it gets) is deterministic.
    """
    objects, receptacles, _, _ = _vocabulary()
    names = sorted(set(objects) | set(receptacles))
    return [f" {name} {number}" for name in names for number in range(1, max_number + 1)]


class _Sampler:
    """Random ALFWorld phrases from one seeded RNG."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.objects, self.receptacles, self.tasks, self.rhs = _vocabulary()

    def instance(self, names: tuple[str, ...]) -> str:
        return f"{self.rng.choice(names)} {self.rng.randint(1, 12)}"

    def thing_list(self, names: tuple[str, ...]) -> str:
        items = [f"a {self.instance(names)}" for _ in range(self.rng.randint(0, 8))]
        if not items:
            return "nothing"
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + ", and " + items[-1]

    def task(self) -> str:
        template = self.rng.choice(self.tasks)
        return template.format(
            obj=self.rng.choice(self.objects),
            recep=self.rng.choice(self.receptacles),
            toggle=self.rng.choice(("desklamp", "floorlamp")),
            mrecep=self.rng.choice(("bowl", "mug", "plate", "pan", "pot", "cup")),
        )

    def grammar_line(self) -> str:
        text = self.rng.choice(self.rhs)
        text = _LIST_EXPR.sub(lambda _: self.thing_list(self.objects), text)
        text = _REFERENCE.sub(lambda _: "", text)
        text = _NAME.sub(lambda _: self.instance(self.objects + self.receptacles), text)
        return _INDEFINITE.sub("a", text)

    def room(self) -> str:
        return (
            "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly "
            f"around you, you see {self.thing_list(self.receptacles)}.\n\nYour task is to: {self.task()}."
        )

    def action(self) -> str:
        obj, recep = self.instance(self.objects), self.instance(self.receptacles)
        verb, _, appliance = self.rng.choice(_STATES)
        return self.rng.choice(
            (
                f"go to {recep}",
                f"take {obj} from {recep}",
                f"put {obj} in/on {recep}",
                f"move {obj} to {recep}",
                f"open {recep}",
                f"close {recep}",
                f"use {obj}",
                f"{verb} {obj} with {appliance} {self.rng.randint(1, 3)}",
                f"slice {obj} with {self.instance(('knife', 'butterknife'))}",
                f"examine {self.rng.choice((obj, recep))}",
                "inventory",
                "look",
            )
        )

    def thought(self) -> str:
        verb, state, appliance = self.rng.choice(_STATES)
        obj = self.rng.choice(self.objects)
        return self.rng.choice(_THOUGHTS).format(
            a="an" if obj[0] in "aeiou" else "a",
            obj=obj,
            recep=self.instance(self.receptacles),
            verb=verb,
            state=state,
            appliance=appliance,
            task=self.task(),
            lamp=self.rng.choice(("desklamp 1", "floorlamp 1")),
        )

    def episode(self, turns: int) -> str:
        """One synthetic episode as plain text: prompt, then responses and observations."""
        parts = [ALFWORLD_SYSTEM_PROMPT, task_message(f"Your task is to: {self.task()}.", self.room())]
        for _ in range(turns):
            action = self.action()
            parts.append(format_response(action, self.thought() if self.rng.random() < 0.8 else None))
            admissible = [self.action() for _ in range(self.rng.randint(0, 6))]
            if self.rng.random() < 0.1:
                parts.append(inadmissible_action_feedback(action, admissible))
            else:
                parts.append(format_observation(self.grammar_line(), admissible))
        return "\n".join(parts)


def tool_schema_text(tool: ToolSpec) -> str:
    """The tools block of the system prompt for ``tool``, as the chat template writes it."""
    return "# Tools\n<tools>\n" + json.dumps(tool.json_schema(), ensure_ascii=False) + "\n</tools>"


def chat_format_texts() -> list[str]:
    """The fixed text of the chat format: roles, the tool schema, rejection feedback."""
    failure = parse_response("")
    assert isinstance(failure, ParseFailure)
    return [
        "system\n" + ALFWORLD_SYSTEM_PROMPT,
        tool_schema_text(ALFWORLD_STEP),
        'Call a tool with <tool_call>\n{"name": <name>, "arguments": <json object>}\n</tool_call>',
        "user\n",
        "assistant\n",
        format_tool_call("look"),
        failure.feedback,
    ]


def alfworld_corpus(seed: int, num_episodes: int = 3000) -> Iterator[str]:
    """Synthetic ALFWorld episodes (deterministic given ``seed``), then the chat format's text."""
    sampler = _Sampler(seed)
    for _ in range(num_episodes):
        yield sampler.episode(turns=sampler.rng.randint(1, 8))
    for _ in range(20):  # the chat format's fixed text is in every prompt: make it cheap to encode
        yield from chat_format_texts()
