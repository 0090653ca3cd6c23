"""Generated household games: reproducible, within size limits, solvable in principle, and drawn
from disjoint scenes for train and valid_unseen."""

import pytest

from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES
from services.envs.alfworld.alfred_assets import can_contain, load_scene, scene_numbers
from services.envs.alfworld.generator import GenerationParams, generate_world, make_game
from services.envs.alfworld.tasks import APPLIANCES, ROOM_TYPES

PARAMS = GenerationParams(max_receptacles=8, max_distractors=6, max_targets=2)


def test_same_game_index_gives_the_same_game():
    assert make_game("train", "pick_and_place", 3, PARAMS) == make_game("train", "pick_and_place", 3, PARAMS)


def test_different_indices_give_different_games():
    problems = {make_game("train", "pick_and_place", i, PARAMS)["pddl_problem"] for i in range(10)}
    assert len(problems) == 10


def test_split_scene_pools_are_disjoint():
    assert not set(scene_numbers("train")) & set(scene_numbers("valid_unseen"))
    for task_type in HOUSEHOLD_TASK_TYPES:
        valid = {generate_world("valid_unseen", task_type, i, PARAMS).scene for i in range(8)}
        assert valid <= set(scene_numbers("valid_unseen"))


@pytest.mark.parametrize("task_type", HOUSEHOLD_TASK_TYPES)
def test_worlds_hold_what_their_goal_needs(task_type):
    for index in range(15):
        world = generate_world("train", task_type, index, PARAMS)
        obj, recep, toggle = world.goal_types
        types = {r.type for r in world.receptacles}
        assert len(world.receptacles) <= PARAMS.max_receptacles
        assert load_scene(world.scene).room_type in ROOM_TYPES[task_type]
        targets = [t for t in world.things if t.type == obj]
        low = 2 if task_type == "pick_two_obj_and_place" else 1
        assert low <= len(targets) <= max(low, PARAMS.max_targets)
        host_type = {r.id: r.type for r in world.receptacles}
        for target in targets:
            assert host_type[target.receptacle] != recep, "a target must not start where it should end"
            assert can_contain(host_type[target.receptacle], obj)
        if recep is not None:
            assert recep in types and can_contain(recep, obj)
        if task_type in APPLIANCES:
            assert APPLIANCES[task_type][0] in types
        if toggle is not None:
            assert any(t.type == toggle for t in world.things)
        assert world.objective == world.objective.strip() and not world.objective.endswith(".")


def test_game_json_is_a_textworld_pddl_game_with_the_objective_in_the_grammar():
    game = make_game("valid_unseen", "pick_cool_then_place", 0, PARAMS)
    assert set(game) == {"pddl_domain", "grammar", "pddl_problem", "turnopd"}
    assert "(define (domain alfred)" in game["pddl_domain"]
    objective = game["turnopd"]["objective"]
    assert objective.endswith(".") and objective[:-1] in game["grammar"]
    assert 'template :: "put {o} in/on {r}";' in game["grammar"]
    assert game["pddl_problem"].count("(") == game["pddl_problem"].count(")")


def test_size_limits_change_the_games_and_the_cache_key():
    small = GenerationParams(max_receptacles=5, max_distractors=0, max_targets=1)
    world = generate_world("train", "pick_and_place", 0, small)
    assert len(world.receptacles) <= 5
    assert {t.type for t in world.things} == {world.goal_types[0]}
    assert small.cache_key() != PARAMS.cache_key()
