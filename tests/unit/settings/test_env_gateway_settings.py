"""The [env_gateway] settings section: defaults, overrides, and where games come from."""

import pytest

from services.errors import ConfigError
from services.settings.controller import ControllerSettings
from services.settings.env_gateway import EnvGatewaySettings
from services.settings.loader import load_settings


def test_defaults_bind_to_loopback():
    settings = load_settings().env_gateway
    assert settings.host == "127.0.0.1" and settings.workers >= 1
    assert settings.household.max_receptacles == 8


def test_environment_overrides_nested_keys(monkeypatch):
    monkeypatch.setenv("TURNOPD_ENV_GATEWAY__WORKERS", "3")
    monkeypatch.setenv("TURNOPD_ENV_GATEWAY__HOUSEHOLD__MAX_RECEPTACLES", "6")
    settings = load_settings().env_gateway
    assert settings.workers == 3 and settings.household.max_receptacles == 6


def test_invalid_values_name_the_key(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[env_gateway.textworld]\nchallenges = ["tw-chess"]\n')
    with pytest.raises(ConfigError, match=r"env_gateway\.textworld.*tw-chess"):
        load_settings(config)


def test_cache_dir_follows_turnopd_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("TURNOPD_CACHE_DIR", str(tmp_path))
    assert EnvGatewaySettings().resolved_cache_dir() == tmp_path / "envs"
    assert EnvGatewaySettings(cache_dir=tmp_path / "x").resolved_cache_dir() == tmp_path / "x"


def test_alfworld_data_counts_only_with_alfworld_layout(monkeypatch, tmp_path):
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    assert EnvGatewaySettings().resolved_alfworld_data() is None  # what `import alfworld` leaves behind
    (tmp_path / "json_2.1.1").mkdir()
    assert EnvGatewaySettings().resolved_alfworld_data() == tmp_path
    assert EnvGatewaySettings(alfworld_data=tmp_path / "mine").resolved_alfworld_data() == tmp_path / "mine"


def test_external_gateway_url_is_the_setting_else_the_old_variable(monkeypatch):
    monkeypatch.delenv("TURNOPD_ENV_GATEWAY_URL", raising=False)
    assert EnvGatewaySettings().resolved_url() is None  # start a local gateway
    monkeypatch.setenv("TURNOPD_ENV_GATEWAY_URL", "http://gw:8100")
    assert EnvGatewaySettings().resolved_url() == "http://gw:8100"
    assert EnvGatewaySettings(url="http://other:9000").resolved_url() == "http://other:9000"
    monkeypatch.delenv("TURNOPD_ENV_GATEWAY_URL")
    monkeypatch.setenv("TURNOPD_ENV_GATEWAY__URL", "http://tree:8100")  # the tree's own override
    assert load_settings(None).env_gateway.resolved_url() == "http://tree:8100"


def test_external_redis_url_is_the_setting_else_redis_url(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert ControllerSettings().resolved_redis_url() is None  # the run's embedded redis-server
    monkeypatch.setenv("REDIS_URL", "redis://:pw@r:6379/0")
    assert ControllerSettings().resolved_redis_url() == "redis://:pw@r:6379/0"
    assert ControllerSettings(redis_url="redis://:x@s:6379/1").resolved_redis_url() == "redis://:x@s:6379/1"
