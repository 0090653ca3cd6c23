"""The retrieval server in a child process (`turnopd serve retrieval` on a free loopback port),
for tests and local runs of the search env's remote mode."""

import sys
from pathlib import Path

from services.child_server import ChildServer


class LocalRetrievalServer(ChildServer):
    """``with LocalRetrievalServer(config) as server: ... server.url ...``; stopped (SIGINT) on exit.

    ``delay_s`` and ``fail_every`` are the server's own fault-injection flags (slow answers,
    every n-th request a 500), for tests of the remote adapter.
    """

    label = "retrieval server"
    log_name = "retrieval.log"
    scratch_prefix = "turnopd-retrieval-"

    def __init__(
        self,
        config: Path | None = None,
        *,
        delay_s: float | None = None,
        fail_every: int | None = None,
        startup_timeout_s: float = 120.0,
    ) -> None:
        super().__init__(startup_timeout_s=startup_timeout_s, stop_timeout_s=15.0)
        self._options = {"--config": config, "--delay-s": delay_s, "--fail-every": fail_every}

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "services.cli", "serve", "retrieval", "--port", str(self.port)]
        for flag, value in self._options.items():
            if value is not None:
                command += [flag, str(value)]
        return command
