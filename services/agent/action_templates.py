"""Admissible-action templates: an admissible entry ``verb[<placeholder>]`` (e.g. ``search[<query>]``)
admits ``verb[...]`` with any non-blank text between the brackets. Free-text actions (search
queries, answers) are validated by the same admissible list as fixed commands.

Pure module: standard library only.
"""

import re

_TEMPLATE = re.compile(r"^([a-z_]+)\[<[^<>\[\]]+>\]$")


def template_verb(entry: str) -> str | None:
    """'search[<query>]' -> 'search'; None for an entry that is not a template."""
    match = _TEMPLATE.match(entry)
    return match.group(1) if match else None


def fill_template(action: str, entry: str) -> str | None:
    """The canonical action (verb in lower case, inner spaces collapsed) if ``entry`` admits it."""
    verb = template_verb(entry)
    if verb is None:
        return None
    match = re.match(rf"^\s*{verb}\s*\[(.*)\]\s*$", action, re.DOTALL | re.IGNORECASE)
    if match is None:
        return None
    text = " ".join(match.group(1).split())
    return f"{verb}[{text}]" if text else None
