"""A standalone env gateway in a child process (`turnopd serve env-gateway` on a free loopback port).

Commands that need a gateway and were given no URL (`turnopd eval`, tests) start one this way:
a separate process keeps the env worker pool out of the caller's (and Ray's) process, and the
gateway's output goes to a log file whose tail is shown if it fails to come up.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import httpx

from services.errors import TurnOPDError
from services.loopback import free_loopback_port

HEALTH_POLL_S = 0.2


class LocalGateway:
    """``with LocalGateway(config) as gateway: ... gateway.url ...``; stopped (SIGINT) on exit.

    ``port``: where it listens on 127.0.0.1 (None or 0: a free port). ``log_path``: where the
    server's output goes; without one it goes to a fresh temporary directory, removed again by a
    clean ``stop`` and kept (its path in the error) when the server failed to come up.
    """

    def __init__(
        self,
        config: Path | None = None,
        *,
        workers: int | None = None,
        startup_timeout_s: float = 600.0,
        log_path: Path | None = None,
        port: int | None = None,
    ) -> None:
        self.port = port or free_loopback_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._config = config
        self._workers = workers
        self._timeout = startup_timeout_s
        self._scratch: Path | None = None
        if log_path is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="turnopd-gateway-"))
            log_path = self._scratch / "gateway.log"
        self.log_path = log_path
        self._failed = False
        self._process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "services.cli", "serve", "env-gateway"]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        if self._workers is not None:
            command += ["--workers", str(self._workers)]
        if self._config is not None:
            command += ["--config", str(self._config)]
        return command

    def start(self, on_wait: Callable[[], None] | None = None) -> "LocalGateway":
        """Start the server and wait until ``/healthz`` answers 200 (games may be generated first)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as sink:
            self._process = subprocess.Popen(self.command(), stdout=sink, stderr=sink, env=dict(os.environ))
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._failed = True
                raise TurnOPDError(
                    f"env gateway exited with code {self._process.returncode}; log {self.log_path}:\n"
                    f"{self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if on_wait is not None:
                on_wait()
            time.sleep(HEALTH_POLL_S)
        self._failed = True
        self.stop()
        raise TurnOPDError(f"env gateway not healthy after {self._timeout:.0f}s; log {self.log_path}")

    def stop(self) -> None:
        """Interrupt the server (it closes its episodes and workers), killing it if it hangs; then
        remove the temporary log directory unless the server failed."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._scratch is not None and not self._failed:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def __enter__(self) -> "LocalGateway":
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
