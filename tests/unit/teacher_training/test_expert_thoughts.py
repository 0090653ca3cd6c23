"""The expert's thoughts: the facts its next action rests on, replayed from the observable history."""

import pytest
from expert_episodes import SCRIPT, scripted_episode

from services.contracts.expert_data import ExpertEpisode, ExpertTurn
from services.envs.alfworld.observations import RoomKnowledge
from services.envs.alfworld.tasks import HouseholdGoal
from services.errors import InputError
from services.teacher_training.expert_thoughts import expert_thoughts, thought


def test_one_thought_per_turn_from_the_history_before_it(episode: ExpertEpisode):
    assert expert_thoughts(episode) == [
        "put apple in drawer 1. holding: nothing. seen: none. at: none. "
        "unsearched: countertop 1 drawer 1 sinkbasin 1.",
        "put apple in drawer 1. holding: nothing. seen: apple 1 in countertop 1. at: countertop 1. "
        "unsearched: drawer 1 sinkbasin 1.",
        "put apple in drawer 1. holding: apple 1. seen: none. at: countertop 1. unsearched: drawer 1 sinkbasin 1.",
        "put apple in drawer 1. holding: apple 1. seen: none. at: drawer 1 closed. "
        "unsearched: drawer 1 sinkbasin 1.",
        "put apple in drawer 1. holding: apple 1. seen: none. at: drawer 1. unsearched: sinkbasin 1.",
    ]


def test_task_phrases_name_the_appliance_and_destination_of_the_room():
    room = RoomKnowledge(receptacles=["cabinet 1", "fridge 1", "microwave 1", "sinkbasin 1", "sinkbasin 2"])
    cool = HouseholdGoal("pick_cool_then_place", obj="apple", recep="cabinet")
    assert thought(cool, room).startswith("cool apple with fridge 1, put in cabinet 1. holding: nothing.")
    room.holding = "apple 2"
    room.changed["cool"] = {"apple 2"}
    assert "holding: apple 2, cooled." in thought(cool, room)
    look = HouseholdGoal("look_at_obj_in_light", obj="book", toggle="desklamp")
    room.contents["cabinet 1"] = ["desklamp 1", "book 3", "pen 1"]
    assert thought(look, room) == (
        "look at book under desklamp. holding: apple 2, cooled. seen: desklamp 1 in cabinet 1, book 3 in cabinet 1. "
        "at: none. unsearched: fridge 1 microwave 1 sinkbasin 1 sinkbasin 2."
    )


def test_pick_two_does_not_count_targets_already_in_the_destination():
    room = RoomKnowledge(
        receptacles=["shelf 1", "sofa 1"], contents={"shelf 1": ["pen 2"], "sofa 1": ["pen 1"]}
    )
    two = HouseholdGoal("pick_two_obj_and_place", obj="pen", recep="sofa")
    assert (
        thought(two, room)
        == "put two pen in sofa 1. holding: nothing. seen: pen 2 in shelf 1. at: none. unsearched: none."
    )


def test_an_episode_that_strays_from_the_expert_is_refused():
    episode = scripted_episode()
    start = episode.start.model_copy(update={"expert_action": SCRIPT[2][0]})
    turns = [ExpertTurn(action=SCRIPT[2][0], result=episode.turns[0].result), *episode.turns[1:]]
    with pytest.raises(InputError, match="disagrees"):
        expert_thoughts(ExpertEpisode(start=start, turns=turns))
    free_form = episode.model_copy(
        update={"start": episode.start.model_copy(update={"objective": "tidy up"})}
    )
    with pytest.raises(InputError, match="not a household goal"):
        expert_thoughts(free_form)


def test_a_false_belief_claims_an_absent_object_where_the_agent_stands_and_takes_it():
    import random

    from services.teacher_training.expert_thoughts import _absent_object

    goal = HouseholdGoal("pick_and_place", obj="apple", recep="drawer")
    room = RoomKnowledge(
        receptacles=["countertop 1", "drawer 1", "shelf 1"],
        location="countertop 1",
        contents={"countertop 1": ["apple 1", "pan 1"], "shelf 1": ["mug 2"]},
        closed={"countertop 1": False},
    )
    admissible = ["take apple 1 from countertop 1", "take pan 1 from countertop 1", "go to drawer 1"]
    rng = random.Random(0)
    beliefs = [_absent_object(goal, room, admissible, rng) for _ in range(60)]
    claimed = {s.action.removeprefix("take ").removesuffix(" from countertop 1") for s in beliefs if s}
    assert claimed == {"apple 2", "apple 3", "mug 2"}  # never what is really here
    for s in beliefs:
        assert s is not None and s.action not in admissible
        name = s.action.removeprefix("take ").removesuffix(" from countertop 1")
        assert s.thought == thought(goal, room).replace(
            "seen: apple 1 in countertop 1.", f"seen: {name} in countertop 1."
        )
    for change in ({"holding": "pen 1"}, {"location": None}, {"location": "drawer 1"}):
        other = RoomKnowledge(**{**room.__dict__, **change})
        assert _absent_object(goal, other, admissible, rng) is None  # hands full, nowhere, unsearched
    closed = RoomKnowledge(**{**room.__dict__, "closed": {"countertop 1": True}})
    assert _absent_object(goal, closed, admissible, rng) is None


def test_a_false_belief_can_put_a_receptacle_the_room_lacks_first_and_go_there():
    import random

    from services.teacher_training.expert_thoughts import false_belief

    goal = HouseholdGoal("pick_and_place", obj="apple", recep="drawer")
    room = RoomKnowledge(receptacles=["bed 1", "shelf 1", "shelf 2"], contents={"shelf 1": []})
    rng = random.Random(0)
    beliefs = [
        false_belief(goal, room, ["go to bed 1", "go to shelf 1", "go to shelf 2"], rng) for _ in range(30)
    ]
    for belief in beliefs:  # nowhere to stand: only the phantom receptacle is possible
        assert belief is not None and belief.action.startswith("go to ")
        phantom = belief.action.removeprefix("go to ")
        assert phantom.endswith(" 1") and phantom not in room.receptacles
        assert belief.thought.endswith(f"unsearched: {phantom} bed 1 shelf 2.")
    assert len({b.action for b in beliefs if b}) > 3


def test_a_drifted_goal_names_another_kind_the_room_has_and_derives_the_rest_from_it():
    import random

    from services.teacher_training.expert_thoughts import drifted_thought

    goal = HouseholdGoal("pick_two_obj_and_place", obj="tennisracket", recep="bed")
    room = RoomKnowledge(
        receptacles=["bed 1", "desk 1", "sidetable 1"],
        location="sidetable 1",
        contents={"sidetable 1": ["tennisracket 1", "remotecontrol 1"]},
    )
    rng = random.Random(0)
    drifts = {drifted_thought(goal, room, rng) for _ in range(40)}
    assert drifts == {
        "put two remotecontrol in bed 1. holding: nothing. seen: remotecontrol 1 in sidetable 1. "
        "at: sidetable 1. unsearched: bed 1 desk 1.",
        "put two tennisracket in desk 1. holding: nothing. seen: tennisracket 1 in sidetable 1. "
        "at: sidetable 1. unsearched: bed 1 desk 1.",
        "put two tennisracket in sidetable 1. holding: nothing. seen: none. at: sidetable 1. unsearched: bed 1 desk 1.",
    }
    assert thought(goal, room) not in drifts
    alone = RoomKnowledge(receptacles=["bed 1"], contents={"bed 1": ["tennisracket 2"]})
    assert drifted_thought(goal, alone, rng) is None  # no other object or receptacle kind known
