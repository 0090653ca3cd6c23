"""Expert dataset contracts survive a JSON round trip and reject episodes that did not follow the expert."""

import pytest
from expert_episodes import scripted_episode
from pydantic import ValidationError

from services.contracts.expert_data import ExpertDatasetInfo, ExpertEpisode, ExpertTurn


def test_episode_and_info_round_trip_through_json():
    episode = scripted_episode(seed=4)
    assert ExpertEpisode.model_validate_json(episode.model_dump_json()) == episode
    assert episode.won and not scripted_episode(turns=3).won
    info = ExpertDatasetInfo(
        format=1,
        env="alfworld",
        split="train",
        seeds=[0, 1, 2],
        games='{"generated": "v1-r8-d6-t2"}',
        max_expert_turns=60,
        episodes=2,
        dropped=1,
    )
    assert ExpertDatasetInfo.model_validate_json(info.model_dump_json()) == info


def test_actions_must_be_the_expert_suggestions_and_only_the_last_turn_may_end():
    episode = scripted_episode()
    swapped = [episode.turns[1], episode.turns[0], *episode.turns[2:]]
    with pytest.raises(ValidationError, match="expert action suggested"):
        ExpertEpisode(start=episode.start, turns=swapped)
    ended_early = episode.turns[0].result.model_copy(update={"done": True})
    early = [ExpertTurn(action=episode.turns[0].action, result=ended_early), *episode.turns[1:]]
    with pytest.raises(ValidationError, match="only the last turn"):
        ExpertEpisode(start=episode.start, turns=early)
    with pytest.raises(ValidationError):
        ExpertEpisode(start=episode.start, turns=[])
    with pytest.raises(ValidationError):
        ExpertTurn.model_validate({"action": "look", "result": episode.turns[0].result, "extra": 1})


def test_a_detour_plays_anything_but_the_suggestion_and_never_ends_the_episode():
    episode = scripted_episode()
    first = episode.turns[0]
    assert first.action == episode.start.expert_action
    with pytest.raises(ValidationError, match="a detour any other action"):
        ExpertEpisode(
            start=episode.start, turns=[first.model_copy(update={"detour": True}), *episode.turns[1:]]
        )
    # A detour of another action, after which the expert's next suggestion is played.
    detour_result = first.result.model_copy(update={"expert_action": first.action})
    detour = ExpertTurn(action="inventory", result=detour_result, detour=True)
    replayed = ExpertEpisode(start=episode.start, turns=[detour, *episode.turns])
    assert [t.detour for t in replayed.turns] == [True] + [False] * len(episode.turns)
    last = episode.turns[-1].model_copy(update={"detour": True, "action": "look"})
    with pytest.raises(ValidationError, match="last turn must be the expert"):
        ExpertEpisode(start=episode.start, turns=[*episode.turns[:-1], last])
