"""Objective templates parse back into the goal they were written from."""

import pytest

from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES
from services.envs.alfworld.tasks import (
    HouseholdGoal,
    check_task_type,
    goal_pddl,
    objective_templates,
    parse_objective,
)


@pytest.mark.parametrize("task_type", HOUSEHOLD_TASK_TYPES)
def test_every_template_parses_back_to_its_goal(task_type):
    for template in objective_templates(task_type):
        text = template.format(obj="mug", recep="coffeemachine", toggle="desklamp") + "."
        goal = parse_objective(text)
        if task_type == "look_at_obj_in_light":
            assert goal == HouseholdGoal(task_type, obj="mug", toggle="desklamp")
        else:
            assert goal == HouseholdGoal(task_type, obj="mug", recep="coffeemachine")


def test_parse_accepts_the_intro_prefix_and_case():
    goal = parse_objective("Your task is to: Put a CLEAN apple in fridge.")
    assert goal == HouseholdGoal("pick_clean_then_place", obj="apple", recep="fridge")


def test_free_form_objectives_are_not_guessed():
    assert parse_objective("rinse the apple and chill it") is None
    assert parse_objective("put a clean red apple in fridge.") is None


def test_goal_pddl_names_the_alfred_types_with_standard_typing():
    pddl = goal_pddl("pick_heat_then_place", "Apple", "CounterTop", None)
    assert "(objectType ?o AppleType)" in pddl
    assert "(receptacleType ?r CounterTopType)" in pddl
    assert "(isHot ?o)" in pddl
    assert " # " not in pddl and "?r - receptacle" in pddl


def test_unknown_task_type_is_named_in_the_error():
    with pytest.raises(ValueError, match="pick_and_dance"):
        check_task_type("pick_and_dance")
