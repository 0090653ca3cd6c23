"""A standalone env gateway in a child process (`turnopd serve env-gateway` on a free loopback port).

Commands that need a gateway and were given no URL (`turnopd eval`, tests) start one this way:
a separate process keeps the env worker pool out of the caller's (and Ray's) process, and the
gateway's output goes to a log file whose tail is shown if it fails to come up.
"""

import sys
from pathlib import Path

from services.child_server import ChildServer


class LocalGateway(ChildServer):
    """``with LocalGateway(config) as gateway: ... gateway.url ...``; stopped (SIGINT) on exit.

    ``port``: where it listens on 127.0.0.1 (None or 0: a free port). ``log_path``: where the
    server's output goes; without one it goes to a fresh temporary directory, removed again by a
    clean ``stop`` and kept (its path in the error) when the server failed to come up.
    """

    label = "env gateway"
    log_name = "gateway.log"
    scratch_prefix = "turnopd-gateway-"

    def __init__(
        self,
        config: Path | None = None,
        *,
        workers: int | None = None,
        startup_timeout_s: float = 600.0,
        log_path: Path | None = None,
        port: int | None = None,
    ) -> None:
        super().__init__(startup_timeout_s=startup_timeout_s, log_path=log_path, port=port)
        self._config = config
        self._workers = workers

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "services.cli", "serve", "env-gateway"]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        if self._workers is not None:
            command += ["--workers", str(self._workers)]
        if self._config is not None:
            command += ["--config", str(self._config)]
        return command
