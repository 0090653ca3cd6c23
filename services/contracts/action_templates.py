"""Matching an action to the admissible commands, written once for the agent and the env gateway,
and the protocol for admissible actions with a free-text slot, such as WebShop's
``search[<your keywords>]``.

An admissible action of the form ``verb[<placeholder>]`` (a lower-case placeholder right after
``<``) stands for every ``verb[...]`` with non-empty text: ``search[red running shoes]`` is
admissible when ``search[<your keywords>]`` is listed. Buttons such as ``click[< Prev]`` or
``click[Next >]`` are not templates. Pure module: standard library only.
"""

import re
from collections.abc import Sequence

_TEMPLATE = re.compile(r"^\s*([a-z_]+)\[<[a-z][a-z ]*>\]\s*$", re.IGNORECASE)
# The env gateway's limit on one action (StepRequest.action); longer text is not admissible.
MAX_ACTION_CHARS = 512


def template_verb(command: str) -> str | None:
    """The verb of a template action (``search`` for ``search[<your keywords>]``), else None."""
    match = _TEMPLATE.match(command)
    return match.group(1).lower() if match else None


def fill_template(action: str, command: str) -> str | None:
    """``action`` spelled canonically (``verb[text]``, spaces collapsed) if the template admits it."""
    verb = template_verb(command)
    if verb is None:
        return None
    match = re.match(rf"^\s*{verb}\s*\[(.*)\]\s*$", action, re.IGNORECASE | re.DOTALL)
    if match is None:
        return None
    text = " ".join(match.group(1).split())
    filled = f"{verb}[{text}]"
    return filled if text and len(filled) <= MAX_ACTION_CHARS else None


def normalize_action(action: str) -> str:
    """Canonical form for comparing actions: lower case, single spaces, no surrounding blanks."""
    return " ".join(action.lower().split())


def match_admissible(action: str, admissible: Sequence[str]) -> str | None:
    """The admissible command (spelled as the environment spells it) that ``action`` names, if any."""
    wanted = normalize_action(action)
    for command in admissible:
        if normalize_action(command) == wanted:
            return command
    # Free-text actions (WebShop's search[<your keywords>]) come back in their canonical spelling.
    return next((f for c in admissible if (f := fill_template(action, c)) is not None), None)
