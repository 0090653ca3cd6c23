"""Actions must be admissible; a rejection lists everything that is wrong with the action."""

import pytest

from services.contracts.action_templates import normalize_action
from services.env_gateway.action_validation import check_action
from services.env_gateway.episode_errors import ActionRejectedError

ADMISSIBLE = [
    "examine cabinet 1",
    "go to fridge 1",
    "go to sinkbasin 1",
    "inventory",
    "look",
    "open cabinet 1",
]


def rejection(action: str, admissible: list[str] = ADMISSIBLE) -> ActionRejectedError:
    with pytest.raises(ActionRejectedError) as info:
        check_action(action, admissible)
    return info.value


def test_admissible_action_is_returned_verbatim_ignoring_case_and_spacing():
    assert check_action("go to fridge 1", ADMISSIBLE) == "go to fridge 1"
    assert check_action("  Go   TO Fridge 1 ", ADMISSIBLE) == "go to fridge 1"
    assert normalize_action(" A  b ") == "a b"


def test_unknown_verb_and_words_are_listed():
    err = rejection("take apple 7 from fridge 1")
    assert any(
        "'take'" in p and "admissible verbs: examine, go to, inventory, look, open" in p for p in err.problems
    )
    assert any("'apple'" in p and "'7'" in p for p in err.problems)
    assert err.admissible_actions == ADMISSIBLE
    assert "'go to fridge 1'" in str(err) and "no turn was used" in str(err)


def test_known_words_in_an_impossible_combination():
    err = rejection("open fridge 1")
    assert err.problems[0] == "every word is known but this combination is not possible in the current state"


def test_near_misses_get_a_suggestion():
    err = rejection("go to fridge 2")
    assert any("did you mean 'go to fridge 1'" in p for p in err.problems)


def test_blank_action_and_empty_admissible_list():
    assert rejection("   ").problems == ["the action is empty"]
    assert rejection("look", []).problems == ["no action is admissible now"]


def test_rejection_error_pickles_with_its_details():
    import pickle

    err = pickle.loads(pickle.dumps(rejection("fly")))
    assert isinstance(err, ValueError) and err.problems and err.admissible_actions == ADMISSIBLE
