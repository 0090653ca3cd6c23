"""Env gateway contracts (HTTP API and worker pipe) survive a JSON round trip and reject junk."""

import pytest
from pydantic import ValidationError

from services.contracts.env_gateway import (
    ActionRejected,
    EnvCatalog,
    EnvInfo,
    EpisodeCreate,
    EpisodeStart,
    Health,
    StepRequest,
    StepResult,
)
from services.contracts.env_worker import (
    REPLY_ADAPTER,
    REQUEST_ADAPTER,
    CloseDone,
    CloseEpisode,
    OpenDone,
    OpenEpisode,
    Ping,
    Pong,
    StepDone,
    StepEpisode,
    WorkerError,
)

HTTP_EXAMPLES = [
    EpisodeCreate(env="alfworld", split="valid_unseen", seed=7, task_type="pick_and_place", expert=True),
    EpisodeCreate(env="textworld", split="train"),
    EpisodeStart(
        episode_id="e1",
        observation="You are in the middle of a room.",
        objective="put a apple in fridge.",
        admissible_actions=["go to fridge 1", "look"],
        task_type="pick_and_place",
        game_id="valid_unseen/pick_and_place/00007",
        seed=7,
        expert_action="go to fridge 1",
    ),
    StepRequest(action="go to fridge 1"),
    StepResult(
        observation="You arrive at fridge 1.",
        reward=0.0,
        done=False,
        won=False,
        admissible_actions=["open fridge 1"],
        turn=1,
        expert_action=None,
    ),
    ActionRejected(detail="no", problems=["unknown verb"], admissible_actions=["look"]),
    EnvCatalog(
        envs=[
            EnvInfo(
                name="alfworld",
                splits=["train", "valid_unseen"],
                task_types=["pick_and_place"],
                source="generated",
                games_per_split={"train": 6, "valid_unseen": 6},
            )
        ]
    ),
    Health(
        status="ok", workers=2, workers_expected=2, active_episodes=3, worker_restarts=1, worker_pids=[5, 6]
    ),
]
REQUESTS = [
    OpenEpisode(episode_id="e", env="alfworld", split="train", seed=3, task_type=None, expert=False),
    StepEpisode(episode_id="e", action="look"),
    CloseEpisode(episode_id="e"),
    Ping(),
]
REPLIES = [
    OpenDone(
        observation="o",
        objective="x.",
        admissible_actions=["look"],
        task_type="t",
        game_id="g",
        expert_action=None,
    ),
    StepDone(observation="o", reward=1.0, done=True, won=True, admissible_actions=[], expert_action=None),
    CloseDone(existed=True),
    Pong(pid=12, episodes=0),
    WorkerError(error="NotFoundError", message="no episode"),
]


@pytest.mark.parametrize("contract", HTTP_EXAMPLES, ids=lambda c: type(c).__name__)
def test_http_contract_json_round_trip(contract):
    assert type(contract).model_validate_json(contract.model_dump_json()) == contract


@pytest.mark.parametrize("contract", HTTP_EXAMPLES, ids=lambda c: type(c).__name__)
def test_http_contract_rejects_unknown_fields(contract):
    data = contract.model_dump() | {"surprise": 1}
    with pytest.raises(ValidationError, match="surprise"):
        type(contract).model_validate(data)


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda c: type(c).__name__)
def test_worker_request_round_trip_through_the_union(request_):
    assert REQUEST_ADAPTER.validate_json(request_.model_dump_json()) == request_


@pytest.mark.parametrize("reply", REPLIES, ids=lambda c: type(c).__name__)
def test_worker_reply_round_trip_through_the_union(reply):
    assert REPLY_ADAPTER.validate_json(reply.model_dump_json()) == reply


@pytest.mark.parametrize(
    "bad",
    [
        {"env": "minecraft", "split": "train"},
        {"env": "alfworld", "split": "test"},
        {"env": "alfworld", "split": "train", "seed": -1},
        {"env": "alfworld", "split": "train", "task_type": ""},
        {"split": "train"},
    ],
)
def test_episode_create_rejects_bad_values(bad):
    with pytest.raises(ValidationError):
        EpisodeCreate.model_validate(bad)


def test_step_request_needs_a_non_empty_action():
    with pytest.raises(ValidationError):
        StepRequest(action="")


def test_worker_error_names_a_known_error_class():
    with pytest.raises(ValidationError):
        WorkerError.model_validate({"error": "KeyError", "message": "x"})
