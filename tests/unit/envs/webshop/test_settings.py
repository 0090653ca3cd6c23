"""The [env_gateway.webshop] settings: the paper's goal counts, overrides, bounds."""

import pytest

from services.errors import ConfigError
from services.settings.loader import load_recipe, load_settings


def test_defaults_are_the_papers_goal_partition_over_a_generated_shop():
    webshop = load_settings().env_gateway.webshop
    assert (webshop.goals_eval, webshop.goals_train) == (200, 3000)
    assert webshop.products == 3000 and webshop.remote_url is None
    assert (webshop.results_per_page, webshop.max_results) == (10, 50)


def test_file_and_environment_override_nested_keys(tmp_path, monkeypatch):
    config = tmp_path / "c.toml"
    config.write_text('[env_gateway.webshop]\nremote_url = "http://shop:36001"\nproducts = 500\n')
    monkeypatch.setenv("TURNOPD_ENV_GATEWAY__WEBSHOP__GOALS_EVAL", "50")
    webshop = load_settings(config).env_gateway.webshop
    assert webshop.remote_url == "http://shop:36001" and webshop.products == 500 and webshop.goals_eval == 50


def test_sft_and_rollout_can_name_webshop(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[rollout]\nenv = "webshop"\nmax_turns = 30\n[sft]\nenv = "webshop"\n')
    settings = load_recipe(config)
    assert settings.rollout.env == "webshop" and settings.sft.env == "webshop"


def test_invalid_values_name_the_key(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[env_gateway.webshop]\nproducts = 5\n")
    with pytest.raises(ConfigError, match=r"env_gateway\.webshop\.products"):
        load_settings(config)
