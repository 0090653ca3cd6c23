"""The embedded redis-server's start on a picked port that another process's socket took after the
pick (the env gateway met it in a suite run, 2026-12-07): its first start picks again; a given
port, or a restart, keeps its port and fails naming the log."""

import socket
from pathlib import Path

import pytest
import redis

import services.controller.embedded_redis as embedded
from services.controller.embedded_redis import EmbeddedRedis
from services.errors import TurnOPDError
from services.loopback import PICKS


@pytest.fixture
def taken_port():
    """A loopback port bound without listening, as an outgoing connection's local port is: nothing
    answers there, and a server cannot bind it."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        yield other.getsockname()[1]


def test_a_picked_port_the_server_cannot_bind_is_picked_again(
    tmp_path: Path, taken_port, monkeypatch
) -> None:
    picks = iter([taken_port])
    real = embedded.free_loopback_port
    monkeypatch.setattr(embedded, "free_loopback_port", lambda: next(picks, None) or real())
    server = EmbeddedRedis(tmp_path / "redis")
    assert server.port == taken_port
    try:
        url = server.start()
        assert server.port != taken_port and url.endswith(f"127.0.0.1:{server.port}/0")
        assert redis.Redis.from_url(url).ping()
        assert "Address already in use" in (tmp_path / "redis" / "redis.log").read_text()  # the first try
    finally:
        server.stop()


def test_a_given_port_that_cannot_be_bound_is_an_error_naming_the_log(tmp_path: Path, taken_port) -> None:
    server = EmbeddedRedis(tmp_path / "redis", port=taken_port)
    with pytest.raises(TurnOPDError, match=r"redis-server exited with code 1; see .*redis\.log"):
        server.start()
    assert server.port == taken_port


def test_a_port_taken_on_every_pick_is_an_error_naming_the_log(
    tmp_path: Path, taken_port, monkeypatch
) -> None:
    monkeypatch.setattr(embedded, "free_loopback_port", lambda: taken_port)
    server = EmbeddedRedis(tmp_path / "redis")
    with pytest.raises(TurnOPDError, match=r"redis-server exited with code 1; see .*redis\.log"):
        server.start()
    assert (tmp_path / "redis" / "redis.log").read_text().count("Address already in use") == PICKS
