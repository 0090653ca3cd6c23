"""Settings of the search env and the retrieval server."""

import pytest
from pydantic import ValidationError

from services.envs.search.settings import SearchEnvSettings
from services.settings import load_settings


def test_defaults_are_embedded_bm25_with_search_r1_topk_and_50_turns():
    settings = load_settings(None).env_gateway.search
    assert (settings.retriever, settings.topk, settings.max_turns) == ("bm25", 3, 50)
    assert load_settings(None).retrieval_server.port == 8200


def test_remote_needs_a_url_and_countries_need_capitals():
    with pytest.raises(ValidationError, match="retrieval_url"):
        SearchEnvSettings(retriever="remote")
    assert SearchEnvSettings(retriever="remote", retrieval_url="http://r:8000").retrieval_url
    with pytest.raises(ValidationError, match="capital"):
        SearchEnvSettings(countries=20, cities=10)


def test_toml_and_environment(tmp_path, monkeypatch):
    config = tmp_path / "c.toml"
    config.write_text("[env_gateway.search]\nseed = 3\ntopk = 5\n[retrieval_server]\nfail_every = 2\n")
    monkeypatch.setenv("TURNOPD_ENV_GATEWAY__SEARCH__MAX_TURNS", "7")
    settings = load_settings(config)
    assert (settings.env_gateway.search.seed, settings.env_gateway.search.topk) == (3, 5)
    assert settings.env_gateway.search.max_turns == 7 and settings.retrieval_server.fail_every == 2
    assert settings.env_gateway.search.corpus_key() != SearchEnvSettings().corpus_key()
