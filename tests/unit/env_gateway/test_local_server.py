"""LocalGateway's process glue: its temporary log directory is removed after a clean run and kept
(named in the error) when the server fails. A few-line HTTP server stands in for the gateway."""

import sys
from pathlib import Path

import pytest

from services.env_gateway.local_server import LocalGateway
from services.errors import TurnOPDError

_HEALTHY = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
print("serving", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


class _StandIn(LocalGateway):
    def __init__(self, script: str, **kwargs: object) -> None:
        super().__init__(startup_timeout_s=20.0, **kwargs)  # type: ignore[arg-type]
        self._script = script

    def command(self) -> list[str]:
        return [sys.executable, "-c", self._script, str(self.port)]


def test_clean_run_removes_its_temporary_log_directory() -> None:
    gateway = _StandIn(_HEALTHY)
    scratch = gateway.log_path.parent
    assert scratch.name.startswith("turnopd-gateway-") and scratch.is_dir()
    with gateway:
        assert gateway.log_path.is_file()
    assert not scratch.exists()


def test_failed_start_keeps_the_log_and_names_it() -> None:
    gateway = _StandIn("import sys; print('boom: no games'); sys.exit(3)")
    with pytest.raises(TurnOPDError, match="exited with code 3") as raised:
        gateway.start()
    assert str(gateway.log_path) in str(raised.value)
    assert "boom: no games" in raised.value.args[0]
    gateway.stop()
    assert gateway.log_path.read_text().strip() == "boom: no games"
    gateway.log_path.unlink()
    gateway.log_path.parent.rmdir()


def test_given_log_path_is_never_removed(tmp_path: Path) -> None:
    log = tmp_path / "run" / "env_gateway.log"
    with _StandIn(_HEALTHY, log_path=log):
        pass
    assert log.is_file()
