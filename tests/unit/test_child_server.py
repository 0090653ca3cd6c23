"""ChildServer's process glue: its temporary log directory is removed after a clean run and kept
(named in the error) when the server fails. A few-line HTTP server stands in for the
gateway and the retrieval server."""

import sys
from pathlib import Path

import pytest

from services.child_server import ChildServer
from services.errors import TurnOPDError

_HEALTHY = """
import http.server, signal, sys
# a job started in the background (CI) inherits SIGINT ignored; the servers we run (uvicorn) install
# their own handler, and so does this stand-in, or every stop waited out its 30 s and killed it
signal.signal(signal.SIGINT, signal.default_int_handler)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
print("serving", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


class _StandIn(ChildServer):
    label = "stand-in server"
    scratch_prefix = "turnopd-stand-in-"

    def __init__(self, script: str, **kwargs: object) -> None:
        super().__init__(startup_timeout_s=20.0, **kwargs)  # type: ignore[arg-type]
        self._script = script

    def command(self) -> list[str]:
        return [sys.executable, "-c", self._script, str(self.port)]


def test_clean_run_removes_its_temporary_log_directory() -> None:
    server = _StandIn(_HEALTHY)
    scratch = server.log_path.parent
    assert scratch.name.startswith("turnopd-stand-in-") and scratch.is_dir()
    with server:
        assert server.log_path.is_file()
    assert not scratch.exists()


def test_failed_start_keeps_the_log_and_names_it() -> None:
    server = _StandIn("import sys; print('boom: no games'); sys.exit(3)")
    with pytest.raises(TurnOPDError, match="stand-in server exited with code 3") as raised:
        server.start()
    assert str(server.log_path) in str(raised.value)
    assert "boom: no games" in raised.value.args[0]
    server.stop()
    assert server.log_path.read_text().strip() == "boom: no games"
    server.log_path.unlink()
    server.log_path.parent.rmdir()


def test_given_log_path_is_never_removed(tmp_path: Path) -> None:
    log = tmp_path / "run" / "env_server.log"
    with _StandIn(_HEALTHY, log_path=log):
        pass
    assert log.is_file()


def test_gateway_and_retrieval_server_commands() -> None:
    from services.env_gateway.local_server import LocalGateway
    from services.retrieval_server.local_server import LocalRetrievalServer

    gateway = LocalGateway(Path("g.toml"), workers=2, port=4321, log_path=Path("unused.log"))
    assert gateway.url == "http://127.0.0.1:4321"
    assert gateway.command()[-8:] == [
        "--host",
        "127.0.0.1",
        "--port",
        "4321",
        "--workers",
        "2",
        "--config",
        "g.toml",
    ]
    retrieval = LocalRetrievalServer(fail_every=3)
    assert retrieval.command()[-4:] == ["--port", str(retrieval.port), "--fail-every", "3"]
    assert retrieval.log_path.parent.name.startswith("turnopd-retrieval-")
    retrieval.stop()
    assert not retrieval.log_path.parent.exists()


def test_a_runs_gateway_reads_its_settings_from_a_file_and_its_token_from_the_environment(
    tmp_path: Path,
) -> None:
    from pydantic import SecretStr

    from services.env_gateway.local_server import LocalGateway
    from services.settings.env_gateway import EnvGatewaySettings
    from services.settings.per_service import EnvGatewayServiceSettings

    settings = EnvGatewayServiceSettings(
        env_gateway=EnvGatewaySettings(workers=3), service_token=SecretStr("s3cret")
    )
    gateway = LocalGateway(settings=settings, port=4321, log_path=tmp_path / "env_gateway.2.log")
    assert gateway.settings_path == tmp_path / "env_gateway.2.settings.json"
    assert gateway.command()[-2:] == ["--settings", str(tmp_path / "env_gateway.2.settings.json")]
    assert "s3cret" not in " ".join(gateway.command())
    assert gateway.environment()["TURNOPD_SERVICE_TOKEN"] == "s3cret"
    with pytest.raises(ValueError, match="not both"):
        LocalGateway(Path("g.toml"), settings=settings)


def test_a_port_another_server_listens_on_is_refused_before_the_child_starts() -> None:
    import socket

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        server = _StandIn(_HEALTHY, port=port)
        with pytest.raises(
            TurnOPDError, match=f"stand-in server: port {port} on 127.0.0.1 already has a server"
        ) as raised:
            server.start()
        assert f"sport = :{port}" in str(raised.value) and "set its port to another port" in str(raised.value)
        assert server._process is None  # no child was started
        assert not server.log_path.exists()
        server.stop()


def _first_pick(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    """The server's first free-port pick is ``port``; the next ones are really free."""
    import services.child_server as child_server

    picks = iter([port])
    real = child_server.free_loopback_port
    monkeypatch.setattr(child_server, "free_loopback_port", lambda: next(picks, None) or real())


@pytest.mark.parametrize("listening", [True, False])
def test_a_picked_port_that_is_taken_is_picked_again(monkeypatch, listening: bool) -> None:
    """A port the server picked is picked again when it is taken. Listening: issue 36's clean-clone
    run, where the gateway and Redis, starting at once, picked the same free port and the gateway
    refused it. Bound only: a suite run (2026-12-07), where the gateway's port was free when checked
    and its child then could not bind it ("address already in use": a socket bound there without
    listening, as an outgoing connection's local port is, passes the check)."""
    import socket

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        if listening:
            other.listen()
        taken = other.getsockname()[1]
        _first_pick(monkeypatch, taken)
        server = _StandIn(_HEALTHY)
        assert server.port == taken
        with server:
            assert server.port != taken and server.url == f"http://127.0.0.1:{server.port}"
            assert "already in use" not in server.log_path.read_text()  # the log is the last child's


def test_a_picked_port_taken_on_every_pick_is_the_last_childs_error(monkeypatch) -> None:
    import socket

    import services.child_server as child_server

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        taken = other.getsockname()[1]
        monkeypatch.setattr(child_server, "free_loopback_port", lambda: taken)
        server = _StandIn(_HEALTHY)
        with pytest.raises(TurnOPDError, match="stand-in server exited with code 1") as raised:
            server.start()
        assert "Address already in use" in str(raised.value) and server.port == taken
        server.stop()
        server.log_path.unlink()
        server.log_path.parent.rmdir()


def test_a_given_port_the_child_cannot_bind_is_the_childs_error() -> None:
    import socket

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))  # bound, not listening: the check passes, the child's bind fails
        given = _StandIn(_HEALTHY, port=other.getsockname()[1])
        with pytest.raises(TurnOPDError, match="stand-in server exited with code 1") as raised:
            given.start()
        assert "Address already in use" in str(raised.value)
        given.stop()
        assert given.log_path.is_file()  # a failed start keeps its log
        given.log_path.unlink()
        given.log_path.parent.rmdir()


def test_a_second_start_of_a_running_server_is_refused_and_starts_no_child() -> None:
    with _StandIn(_HEALTHY) as server:
        pid = server._process.pid if server._process else None
        with pytest.raises(TurnOPDError, match=f"stand-in server is already running \\(pid {pid}"):
            server.start()
    assert server._process is None  # the one child was stopped
