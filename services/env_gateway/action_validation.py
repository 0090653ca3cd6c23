"""Client-side validation of actions (the paper's): an action must be one of the admissible
commands; otherwise the rejection says what is wrong with it, and the game never sees it."""

import difflib
from collections.abc import Sequence

from services.contracts.action_templates import match_admissible, normalize_action
from services.env_gateway.episode_errors import ActionRejectedError

_MAX_LISTED = 60


def check_action(action: str, admissible: Sequence[str]) -> str:
    """The admissible command ``action`` names (verbatim as the game listed it), else ActionRejectedError."""
    command = match_admissible(action, admissible)
    if command is not None:
        return command
    problems = rejection_problems(normalize_action(action), admissible)
    listed = ", ".join(repr(c) for c in admissible[:_MAX_LISTED])
    more = f" (and {len(admissible) - _MAX_LISTED} more)" if len(admissible) > _MAX_LISTED else ""
    message = (
        f"action {action!r} is not admissible: {'; '.join(problems)}. "
        f"The game was not changed and no turn was used. Admissible now: {listed}{more}."
    )
    raise ActionRejectedError(message, problems, list(admissible))


def rejection_problems(action: str, admissible: Sequence[str]) -> list[str]:
    """Every reason a (normalised) action is not admissible, most basic first."""
    if not action:
        return ["the action is empty"]
    commands = [normalize_action(c) for c in admissible]
    if not commands:
        return ["no action is admissible now"]
    problems = []
    verbs = sorted({_verb(c) for c in commands})
    verb = _verb(action)
    if verb not in verbs:
        problems.append(f"no admissible action starts with {verb!r} (admissible verbs: {', '.join(verbs)})")
    known_words = {word for c in commands for word in c.split()}
    unknown = [word for word in dict.fromkeys(action.split()) if word not in known_words]
    if unknown:
        problems.append(f"unknown here: {', '.join(repr(w) for w in unknown)} (in no admissible action)")
    if not problems:
        problems.append("every word is known but this combination is not possible in the current state")
    close = difflib.get_close_matches(action, commands, n=3, cutoff=0.6)
    if close:
        problems.append(f"did you mean {' or '.join(repr(c) for c in close)}?")
    return problems


def _verb(command: str) -> str:
    """The command's verb: two words for 'go to', one otherwise."""
    words = command.split()
    if len(words) >= 2 and words[0] == "go" and words[1] == "to":
        return "go to"
    return words[0].split("[", 1)[0] if words else ""  # 'click[Buy Now]' -> 'click'
