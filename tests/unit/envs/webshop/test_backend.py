"""The `webshop` backend in-process: catalogue cache, goal ids per split, sessions with the expert,
the final score marker, and the worker host serving webshop episodes."""

import pytest

from services.contracts.env_worker import OpenDone, OpenEpisode, StepDone, StepEpisode, WorkerError
from services.env_gateway.backend_factory import make_backend
from services.env_gateway.worker_process import EpisodeHost
from services.envs.backend import GameChoice
from services.envs.webshop.backend import REMOTE_TASK_TYPE, WebShopBackend, catalogue_path
from services.envs.webshop.goals import GoalSplits
from services.envs.webshop.settings import WebShopSettings
from services.envs.webshop.vocabulary import CATEGORIES
from services.errors import InputError
from services.settings.env_gateway import EnvGatewaySettings


@pytest.fixture(scope="module")
def settings(tmp_path_factory) -> EnvGatewaySettings:
    return EnvGatewaySettings(
        cache_dir=tmp_path_factory.mktemp("envs"), webshop=WebShopSettings(products=600, goals_eval=50)
    )


@pytest.fixture(scope="module")
def backend(settings) -> WebShopBackend:
    made = make_backend("webshop", settings, service_token=None)
    assert isinstance(made, WebShopBackend)
    return made


def test_catalog_entry_needs_no_catalogue(tmp_path):
    settings = EnvGatewaySettings(cache_dir=tmp_path)
    info = make_backend("webshop", settings, service_token=None).info()
    assert info.name == "webshop" and info.task_types == list(CATEGORIES)
    assert info.games_per_split == {"train": 3000, "valid_unseen": 200}
    assert info.source == "generated offline (3000 products, catalogue seed 0)"
    assert not catalogue_path(settings.webshop, tmp_path).exists()


def test_catalogue_is_generated_into_the_cache_once(backend, settings):
    path = backend.game_path("train", GameChoice("food", 0))
    assert path == catalogue_path(settings.webshop, settings.resolved_cache_dir()) and path.is_file()
    assert path.name == "catalogue-v1-seed0-n600.json" and len(backend.shop.catalogue) == 600


def test_a_seed_without_task_type_is_a_goal_id_of_the_split(backend):
    splits = GoalSplits(50, 3000)
    for split, seed in (("valid_unseen", 7), ("valid_unseen", 57), ("train", 7)):
        choice = backend.choose(split, seed, None)
        goal = backend.goal_id(split, choice)
        assert (
            goal == splits.goal_id(split, seed) and choice.task_type == backend.shop.goals.goal(goal).category
        )
    assert backend.goal_id("valid_unseen", backend.choose("valid_unseen", 57, None)) == 7
    assert backend.goal_id("train", backend.choose("train", 7, None)) == 57


def test_a_category_restricts_the_goals(backend):
    ids = backend.shop.goals.category_ids("valid_unseen", "food")
    assert backend.pool_size("valid_unseen", "food") == len(ids) > 0
    choice = backend.choose("valid_unseen", 1, "food")
    assert choice == GameChoice("food", 1) and backend.goal_id("valid_unseen", choice) == ids[1]
    with pytest.raises(ValueError, match="unknown task_type"):
        backend.choose("valid_unseen", 1, "toys")


def test_expert_session_ends_with_the_score_marker(backend):
    session = backend.open("valid_unseen", backend.choose("valid_unseen", 0, None), expert=True)
    opening = session.start()
    assert opening.game_id == "valid_unseen/goal_00000" and opening.objective in opening.observation
    assert opening.admissible_actions == ["search[<your keywords>]"]
    assert opening.expert_action is not None and opening.expert_action.startswith("search[")
    action, outcome, turns = opening.expert_action, None, 0
    while action is not None:
        outcome = session.step(action)
        turns += 1
        action = outcome.expert_action
    assert outcome is not None and outcome.done and outcome.won and outcome.reward == 1.0
    assert outcome.observation.endswith("[WEBSHOP_FINAL_SCORE=1.000000]") and outcome.admissible_actions == []
    assert 4 <= turns <= 6
    session.close()


def test_a_session_without_expert_suggests_nothing_and_refuses_impossible_steps(backend):
    session = backend.open("train", GameChoice("beauty", 0), expert=False)
    assert session.start().expert_action is None
    outcome = session.step("search[shampoo]")
    assert not outcome.done and outcome.expert_action is None and outcome.reward == 0.0
    assert outcome.admissible_actions[0] == "click[Back to Search]"
    with pytest.raises(InputError, match="not possible on this page"):
        session.step("click[Buy Now]")


def test_remote_mode_has_one_task_type_and_goal_ids_by_seed(tmp_path):
    remote = WebShopSettings(remote_url="http://127.0.0.1:9", goals_eval=200, goals_train=3000)
    backend = make_backend(
        "webshop", EnvGatewaySettings(cache_dir=tmp_path, webshop=remote), service_token=None
    )
    assert isinstance(backend, WebShopBackend) and backend.task_types() == [REMOTE_TASK_TYPE]
    assert backend.info().source == "AgentGym agentenv_webshop server at http://127.0.0.1:9"
    choice = backend.choose("train", 3005, None)
    assert choice == GameChoice(REMOTE_TASK_TYPE, 5) and backend.goal_id("train", choice) == 205
    assert backend.pool_size("valid_unseen", REMOTE_TASK_TYPE) == 200
    with pytest.raises(InputError, match="no local game files"):
        backend.game_path("train", choice)


def test_worker_host_serves_webshop_episodes(settings):
    host = EpisodeHost(settings, service_token=None)
    try:
        opened = host.handle(
            OpenEpisode(episode_id="w", env="webshop", split="valid_unseen", seed=3, expert=True)
        )
        assert isinstance(opened, OpenDone) and opened.game_id == "valid_unseen/goal_00003"
        assert opened.expert_action is not None
        stepped = host.handle(StepEpisode(episode_id="w", action=opened.expert_action))
        assert isinstance(stepped, StepDone) and "Page 1 (Total results:" in stepped.observation
        refused = host.handle(StepEpisode(episode_id="w", action="click[Nowhere]"))
        assert isinstance(refused, WorkerError) and refused.error == "InputError"
    finally:
        host.close_all()
