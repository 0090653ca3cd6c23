"""The worker's request handler, in-process: games open, step and close; errors become replies."""

import os

import pytest

from services.contracts.env_worker import (
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
from services.env_gateway.worker_process import EpisodeHost
from services.settings.env_gateway import EnvGatewaySettings


@pytest.fixture
def host(tmp_path):
    host = EpisodeHost(EnvGatewaySettings(cache_dir=tmp_path), service_token=None)
    yield host
    host.close_all()


def open_request(episode_id: str = "e1", **overrides) -> OpenEpisode:
    fields = {"episode_id": episode_id, "env": "alfworld", "split": "valid_unseen", "seed": 4, "expert": True}
    return OpenEpisode(**(fields | overrides))


def test_open_step_close(host):
    opened = host.handle(open_request())
    assert isinstance(opened, OpenDone)
    # seed 4 without a task type: the 5th of the six types, game index 0.
    assert opened.task_type == "look_at_obj_in_light"
    assert opened.game_id == "valid_unseen/look_at_obj_in_light/00000"
    assert opened.expert_action in opened.admissible_actions
    assert "help" not in opened.admissible_actions
    stepped = host.handle(StepEpisode(episode_id="e1", action=opened.expert_action))
    assert isinstance(stepped, StepDone) and stepped.observation.startswith("You arrive at")
    pong = host.handle(Ping())
    assert isinstance(pong, Pong) and pong.episodes == 1 and pong.pid == os.getpid()
    assert host.handle(CloseEpisode(episode_id="e1")) == CloseDone(existed=True)
    assert host.handle(CloseEpisode(episode_id="e1")) == CloseDone(existed=False)


def test_same_seed_gives_the_same_game(host):
    first = host.handle(open_request("a"))
    second = host.handle(open_request("b"))
    assert isinstance(first, OpenDone) and isinstance(second, OpenDone)
    assert (first.observation, first.game_id) == (second.observation, second.game_id)


def test_errors_are_replies(host):
    missing = host.handle(StepEpisode(episode_id="nope", action="look"))
    assert isinstance(missing, WorkerError) and missing.error == "NotFoundError"
    bad_type = host.handle(open_request(task_type="pick_and_dance"))
    assert isinstance(bad_type, WorkerError) and bad_type.error == "InputError"
    assert "pick_and_dance" in bad_type.message
    host.handle(open_request("dup"))
    duplicate = host.handle(open_request("dup"))
    assert isinstance(duplicate, WorkerError) and duplicate.error == "ConflictError"
