"""ALFWorld's text grammar, adapted in two places: the objective is written into the intro, and
putting things down reads `put {obj} in/on {recep}` (ALFWorld's original wording, the paper's
action template) instead of the `move {obj} to {recep}` of recent alfworld releases."""

from services.envs.alfworld.alfred_assets import alfred_grammar

_PUT_REWRITES = (
    ('template :: "move {o} to {r}";', 'template :: "put {o} in/on {r}";'),
    ('"rhs": "You move the {o.name} to the {r.name}."', '"rhs": "You put the {o.name} in/on the {r.name}."'),
)
UNKNOWN_GOAL = "UNKNOWN GOAL"


def with_put_wording(grammar: str) -> str:
    """Rewrite the put-down action's template and feedback; grammars already using 'put' are unchanged."""
    for old, new in _PUT_REWRITES:
        grammar = grammar.replace(old, new)
    return grammar


def household_grammar(objective: str) -> str:
    """ALFWorld's grammar with ``objective`` (no final period) as the task line of the intro."""
    if "\n" in objective or '"' in objective or "#" in objective:
        raise ValueError(f"objective must be one plain sentence, got {objective!r}")
    return with_put_wording(alfred_grammar()).replace(UNKNOWN_GOAL, objective)
