"""Where services may listen, how tokens are checked, and which Redis URLs are accepted."""

import pytest

from services import service_auth
from services.errors import ConfigError
from services.service_auth import (
    TOKEN_ENV,
    auth_headers,
    bearer_matches,
    check_bind,
    check_redis_url,
    is_loopback,
)
from services.settings.security import SecuritySettings


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.10.0.3", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("turnopd-redis", False),
    ],
)
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_binding_beyond_the_loopback_needs_a_token():
    check_bind("127.0.0.1", None, "env gateway")
    check_bind("0.0.0.0", "s3cret", "env gateway")
    with pytest.raises(
        ConfigError, match=r"refusing to start the env gateway on 0\.0\.0\.0 without a service"
    ):
        check_bind("0.0.0.0", None, "env gateway")


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        ("Bearer s3cret", True),
        ("bearer s3cret", True),
        ("Bearer s3cret ", True),
        ("Bearer s3cre", False),
        ("Bearer s3cret2", False),
        ("Basic s3cret", False),
        ("s3cret", False),
        ("", False),
        (None, False),
    ],
)
def test_bearer_matches(header, ok):
    assert bearer_matches(header, "s3cret") is ok


def test_tokens_are_compared_in_constant_time(monkeypatch):
    calls = []
    real = service_auth.hmac.compare_digest

    def recording(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(service_auth.hmac, "compare_digest", recording)
    assert not bearer_matches("Bearer nope", "s3cret")
    assert calls == [(b"nope", b"s3cret")]


def test_clients_send_the_token_only_when_there_is_one():
    assert auth_headers("abc") == {"Authorization": "Bearer abc"}
    assert auth_headers(None) == {}


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "redis://localhost:6379/0",
        "redis://:pw@turnopd-redis:6379/0",
        "rediss://user:pw@redis.example.com:6380/0",
        "unix:///tmp/redis.sock",
    ],
)
def test_accepted_redis_urls(url):
    check_redis_url(url, allow_unauthenticated=False)


def test_a_remote_redis_without_password_is_refused_unless_allowed():
    with pytest.raises(ConfigError, match="Redis at turnopd-redis has no password"):
        check_redis_url("redis://turnopd-redis:6379/0", allow_unauthenticated=False)
    with pytest.raises(ConfigError, match="has no password"):
        check_redis_url("redis://user@10.1.2.3:6379/0", allow_unauthenticated=False)
    check_redis_url("redis://turnopd-redis:6379/0", allow_unauthenticated=True)
    with pytest.raises(ConfigError, match="must start with redis://"):
        check_redis_url("http://turnopd-redis:6379", allow_unauthenticated=False)


def test_the_token_comes_from_settings_else_the_environment(monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert SecuritySettings().resolved_service_token() is None
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    assert SecuritySettings().resolved_service_token() == "from-env"
    assert SecuritySettings(service_token="from-config").resolved_service_token() == "from-config"
    monkeypatch.setenv(TOKEN_ENV, "")
    assert SecuritySettings().resolved_service_token() is None
