"""A run's task sources: the implicit single source, overrides, and the errors at load."""

import pytest

from services.errors import ConfigError, InputError
from services.settings import load_settings

HOUSEHOLD = {"env": "alfworld", "share": 0.5, "teacher": "teacher-novel", "max_turns": 50}
SEARCH = {
    "env": "search",
    "share": 0.3,
    "teacher": "teacher-search",
    "depth": {"max": 10, "probe_interval": 4},
}
SHOP = {"env": "webshop", "share": 0.2, "teacher": "teacher-webshop-2", "blend": {"min_floor": 2}}


def test_a_single_env_config_is_one_source_with_the_runs_own_keys():
    settings = load_settings(
        None, {"rollout": {"env": "search", "max_turns": 12}, "models": {"teacher": "teacher-search"}}
    )
    [source] = settings.task_sources()
    assert (source.env, source.share, source.teacher, source.split) == (
        "search",
        1.0,
        "teacher-search",
        "train",
    )
    assert source.eval_split == settings.eval.split and source.max_turns == 12
    assert source.depth == settings.depth and source.blend == settings.blend


def test_each_source_overrides_only_the_keys_it_sets():
    settings = load_settings(None, {"depth": {"max": 40}, "sources": [HOUSEHOLD, SEARCH, SHOP]})
    household, search, shop = settings.task_sources()
    assert household.max_turns == 50 and household.depth == settings.depth
    assert search.max_turns == settings.rollout.max_turns
    assert (search.depth.max, search.depth.probe_interval) == (10, 4)
    assert search.depth.coverage_quantile == settings.depth.coverage_quantile
    assert shop.blend.min_floor == 2 and shop.blend.min_frac == settings.blend.min_frac
    assert [s.teacher for s in (household, search, shop)] == [
        "teacher-novel",
        "teacher-search",
        "teacher-webshop-2",
    ]


@pytest.mark.parametrize(
    ("sources", "extra", "message"),
    [
        ([HOUSEHOLD, SEARCH], {}, "sources: the shares must sum to 1, not 0.5 + 0.3 = 0.8"),
        ([HOUSEHOLD, {**SEARCH, "env": "chess"}, SHOP], {}, "sources.1.env: Input should be"),
        (
            [HOUSEHOLD, {**SEARCH, "env": "alfworld"}, SHOP],
            {},
            "sources[1].env: 'alfworld' is already a source",
        ),
        (
            [HOUSEHOLD, {**SEARCH, "depth": {"maxx": 3}}, SHOP],
            {},
            "sources[1].depth.maxx: not a key of [depth]",
        ),
        (
            [HOUSEHOLD, {**SEARCH, "depth": {"max": 10, "min": 12}}, SHOP],
            {},
            "sources[1].depth: min (12) must be <= max (10)",
        ),
        ([HOUSEHOLD, SEARCH, {**SHOP, "share": 0}], {}, "sources.2.share: Input should be greater than 0"),
        (
            [HOUSEHOLD, SEARCH, SHOP],
            {"rollout": {"env": "search"}},
            "rollout.env is set, but a run with [[sources]]",
        ),
        (
            [HOUSEHOLD, SEARCH, SHOP],
            {"models": {"teacher": "t"}},
            "models.teacher is set, but a run with [[sources]]",
        ),
        (
            [HOUSEHOLD, SEARCH, SHOP],
            {"teacher": {"model": "/t"}},
            "teacher.model is set, but a run with [[sources]]",
        ),
        (
            [HOUSEHOLD, SEARCH, SHOP],
            {"teacher": {"endpoint_url": "http://vllm:8000"}},
            "teacher.endpoint_url is set, but a run with [[sources]] scores each source on its own "
            "teacher; set endpoint_url in the [[sources]] entries",
        ),
        (
            [HOUSEHOLD, {**SEARCH, "endpoint_model": "t"}, SHOP],
            {},
            "sources.1: endpoint_model and endpoint_api_key_env need endpoint_url (the server to score on)",
        ),
        (
            [HOUSEHOLD, SEARCH, {**SHOP, "endpoint_api_key_env": "KEY=1"}],
            {},
            "sources.2.endpoint_api_key_env: String should match pattern",
        ),
        (
            [HOUSEHOLD, SEARCH, {**SHOP, "teacher": "teacher-search", "endpoint_url": "http://vllm:8000"}],
            {},
            "sources[2]: teacher 'teacher-search' is also the teacher of source 'search', which scores "
            "it elsewhere",
        ),
    ],
)
def test_a_bad_task_mix_fails_at_load_naming_the_key(sources, extra, message):
    with pytest.raises(ConfigError) as caught:
        load_settings(None, {"sources": sources, **extra})
    assert message in str(caught.value)


def test_sources_read_from_a_config_file(tmp_path):
    path = tmp_path / "mix.toml"
    path.write_text(
        '[[sources]]\nenv = "alfworld"\nshare = 0.75\nteacher = "teacher-novel"\n'
        '[[sources]]\nenv = "search"\nshare = 0.25\nteacher = "teacher-search"\n[sources.depth]\nmax = 8\n'
    )
    household, search = load_settings(path).task_sources()
    assert (household.share, search.share, search.depth.max) == (0.75, 0.25, 8)


def test_each_source_has_its_own_controller_settings():
    settings = load_settings(None, {"depth": {"max": 40}, "sources": [HOUSEHOLD, SEARCH, SHOP]})
    search = settings.for_controller("search")
    assert (search.env, search.depth.max, search.max_turns) == ("search", 10, settings.rollout.max_turns)
    assert settings.for_controller("alfworld").max_turns == 50
    assert settings.for_controller().env is None  # a single-source run's controller keeps its keys
    with pytest.raises(InputError, match="no task source plays env 'textworld'"):
        settings.for_controller("textworld")


def test_each_teacher_gets_its_own_serve_app_and_two_teachers_one_name_are_refused():
    settings = load_settings(None, {"sources": [HOUSEHOLD, SEARCH, {**SHOP, "teacher": "teacher-search"}]})
    assert [t.app for t in settings.for_teachers()] == ["teacher-novel", "teacher-search"]
    assert settings.for_teacher("webshop").default_model == "teacher-search"
    assert load_settings(None).for_teachers()[0].app == "teacher"
    clash = [HOUSEHOLD, {**SEARCH, "teacher": "/a/qwen"}, {**SHOP, "teacher": "/b/qwen/"}]
    with pytest.raises(ConfigError, match="would both be the Serve app 'teacher-qwen'"):
        load_settings(None, {"sources": clash})


def test_a_saved_multi_environment_config_reads_back():
    from services.settings.tree import saved_settings

    settings = load_settings(None, {"sources": [HOUSEHOLD, SEARCH, SHOP]})
    assert saved_settings(settings.model_dump_json()).task_sources() == settings.task_sources()


def test_a_source_scores_on_its_own_endpoint_with_the_runs_client_keys():
    shop = {
        **SHOP,
        "endpoint_url": "http://vllm-shop:8000",
        "endpoint_model": "shop",
        "endpoint_api_key_env": "K",
    }
    settings = load_settings(
        None,
        {"sources": [HOUSEHOLD, SEARCH, shop], "teacher": {"client_max_attempts": 9, "max_context": 900}},
    )
    household, search, on_server = settings.for_teachers()
    assert (on_server.app, on_server.default_model) == ("teacher-webshop-2", "teacher-webshop-2")
    endpoint = (on_server.teacher.endpoint_url, on_server.teacher.endpoint_model)
    assert endpoint == ("http://vllm-shop:8000", "shop") and on_server.teacher.endpoint_api_key_env == "K"
    assert (on_server.teacher.client_max_attempts, on_server.teacher.max_context) == (9, 900)
    assert household.teacher.endpoint_url == search.teacher.endpoint_url == ""  # their apps, as before
    assert settings.teacher.endpoint_url == ""  # the run's [teacher] itself is unchanged
