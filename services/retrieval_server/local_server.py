"""The retrieval server in a child process (`turnopd serve retrieval` on a free loopback port),
for tests and local runs of the search env's remote mode."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import httpx

from services.errors import TurnOPDError
from services.loopback import free_loopback_port


class LocalRetrievalServer:
    """``with LocalRetrievalServer(config) as server: ... server.url ...``; stopped (SIGINT) on exit."""

    def __init__(
        self,
        config: Path | None = None,
        *,
        delay_s: float | None = None,
        fail_every: int | None = None,
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.port = free_loopback_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkdtemp(prefix="turnopd-retrieval-")) / "retrieval.log"
        self._command = [sys.executable, "-m", "services.cli", "serve", "retrieval", "--port", str(self.port)]
        for flag, value in (("--config", config), ("--delay-s", delay_s), ("--fail-every", fail_every)):
            if value is not None:
                self._command += [flag, str(value)]
        self._timeout = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> "LocalRetrievalServer":
        with self.log_path.open("wb") as sink:
            self._process = subprocess.Popen(self._command, stdout=sink, stderr=sink, env=dict(os.environ))
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                log = self.log_path.read_text(errors="replace")[-3000:]
                raise TurnOPDError(f"retrieval server exited with code {self._process.returncode}:\n{log}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise TurnOPDError(f"retrieval server not healthy after {self._timeout:.0f}s; log {self.log_path}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> "LocalRetrievalServer":
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
