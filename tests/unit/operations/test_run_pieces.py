"""A run's pieces: each service's settings resolved once from the tree, one teacher app per
distinct teacher, a source's teacher settings by its env, and a clear error for an unknown env."""

import pytest

from services.errors import InputError
from services.operations.run_pieces import RunPieces
from services.settings import load_settings
from services.settings.tree import TurnOPDSettings

SOURCES = {
    "sources": [
        {"env": "alfworld", "share": 0.5, "teacher": "teacher-novel"},
        {"env": "search", "share": 0.25, "teacher": "teacher-search"},
        {"env": "webshop", "share": 0.25, "teacher": "teacher-novel"},  # the household teacher again
    ],
    "cluster": {"rollout_workers": 3},
    "security": {"allow_unauthenticated_redis": True},
}


def test_each_piece_is_what_the_tree_composes_for_its_service():
    settings = load_settings(None, SOURCES)
    pieces = RunPieces.of(settings)
    assert pieces.redis == settings.for_redis()
    assert pieces.controllers == settings.for_controllers()
    assert pieces.env_gateway == settings.for_env_gateway()
    assert pieces.rollout_worker == settings.for_rollout_worker()
    assert pieces.learner == settings.for_learner()
    assert pieces.models == settings.models
    assert (pieces.rollout_workers, pieces.allow_unauthenticated_redis) == (3, True)


def test_one_teacher_app_per_distinct_teacher_and_each_sources_settings_by_env():
    settings = load_settings(None, SOURCES)
    pieces = RunPieces.of(settings)
    assert pieces.teacher_envs == ("alfworld", "search")  # webshop shares alfworld's teacher app
    for env in ("alfworld", "search", "webshop"):
        assert pieces.teacher(env) == settings.for_teacher(env)
    assert pieces.teacher("webshop").default_model == "teacher-novel"
    with pytest.raises(
        InputError, match=r"no source 'shop' for its teacher \(it has: alfworld, search, webshop\)"
    ):
        pieces.teacher("shop")


def test_a_single_teacher_run_has_one_app_keyed_none():
    settings = TurnOPDSettings()
    pieces = RunPieces.of(settings)
    assert pieces.teacher_envs == (None,)
    assert pieces.teacher(None) == settings.for_teacher()
    with pytest.raises(InputError, match="no source 'search'"):
        pieces.teacher("search")
