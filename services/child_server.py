"""One of the project's HTTP servers run as a child process on a loopback port, until it answers
``GET /healthz`` with 200; stopped with SIGINT (killed if it hangs).

A port that already has a listener is refused before the child starts: a gateway left behind by
a killed run would otherwise answer the new child's health check (the child itself failing to
bind), and the run would play on the old run's gateway and settings without a word.

Its output goes to a log file whose tail is shown when it fails to come up. Without a given log
path the log goes to a fresh temporary directory, which a clean ``stop`` removes again and a
failed start keeps (its path is in the error).
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx

from services.errors import TurnOPDError
from services.loopback import BIND_FAILED, PortTakenError, free_loopback_port, start_on_picked_port
from services.parent_watch import PARENT_ENV

HEALTH_POLL_S = 0.2


def _listening(port: int) -> bool:
    """Whether a server accepts connections on ``port`` of 127.0.0.1."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


class ChildServer(ABC):
    """Subclasses say what to run (``command``) and what it is called (``label``, ``log_name``,
    ``scratch_prefix``)."""

    label = "server"
    port_setting = "its port"
    log_name = "server.log"
    scratch_prefix = "turnopd-server-"

    def __init__(
        self,
        *,
        startup_timeout_s: float,
        stop_timeout_s: float = 30.0,
        log_path: Path | None = None,
        port: int | None = None,
    ) -> None:
        self._picked = not port  # 0 or None: any free port, which this server chooses itself
        self.port = port or free_loopback_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._timeout = startup_timeout_s
        self._stop_timeout = stop_timeout_s
        self._scratch: Path | None = None
        if log_path is None:
            self._scratch = Path(tempfile.mkdtemp(prefix=self.scratch_prefix))
            log_path = self._scratch / self.log_name
        self.log_path = log_path
        self._failed = False
        self._process: subprocess.Popen[bytes] | None = None

    @abstractmethod
    def command(self) -> list[str]:
        """The argv that runs the server on ``self.port``."""

    def environment(self) -> dict[str, str]:
        """The server's environment: this process's, with this process's pid as the parent the
        server watches (``services.parent_watch``); a subclass adds what it must not put in argv."""
        return dict(os.environ) | {PARENT_ENV: str(os.getpid())}

    def start(self, on_wait: Callable[[], None] | None = None) -> Self:
        """Start the server and wait until ``/healthz`` answers 200 while the child still runs. A
        port this server picked that is taken (a listener there, or the child cannot bind it: another
        process's socket took it after the check, e.g. an outgoing connection's local port) is
        picked again (``start_on_picked_port``)."""
        if self._process is not None and self._process.poll() is None:
            # a second child would take another port and the first would outlive stop()
            raise TurnOPDError(f"{self.label} is already running (pid {self._process.pid}, {self.url})")
        return start_on_picked_port(
            lambda repick: self._start_once(on_wait, repick), self._picked, self._repick
        )

    def _repick(self) -> None:
        self.port = free_loopback_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def _start_once(self, on_wait: Callable[[], None] | None, repick: bool) -> Self:
        self._refuse_taken_port(repick)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as sink:
            self._process = subprocess.Popen(self.command(), stdout=sink, stderr=sink, env=self.environment())
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                tail = self.log_tail()
                if repick and BIND_FAILED in tail.lower():
                    raise PortTakenError(self.port)
                self._failed = True
                raise TurnOPDError(
                    f"{self.label} exited with code {self._process.returncode}; log {self.log_path}:\n{tail}"
                )
            try:
                if (
                    httpx.get(f"{self.url}/healthz", timeout=2.0).status_code == 200
                    and self._process.poll() is None
                ):
                    return self
            except httpx.TransportError:
                pass
            if on_wait is not None:
                on_wait()
            time.sleep(HEALTH_POLL_S)
        self._failed = True
        self.stop()
        raise TurnOPDError(f"{self.label} not healthy after {self._timeout:.0f}s; log {self.log_path}")

    def _refuse_taken_port(self, repick: bool) -> None:
        """Refuse a port that has a listener (a port this server picked and lost to another process
        in the meantime, when ``repick``: picked again by ``start``)."""
        if not _listening(self.port):
            return  # nothing listens there: the port is ours to take
        if repick:
            raise PortTakenError(self.port)
        raise TurnOPDError(
            f"{self.label}: port {self.port} on 127.0.0.1 already has a server listening (another run's "
            f"{self.label}, or one a killed run left behind: `ss -ltnp 'sport = :{self.port}'` names its "
            f"process); stop it, or set {self.port_setting} to another port"
        )

    @property
    def running(self) -> bool:
        """The process was started and has not exited."""
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """Interrupt the server, killing it if it hangs; then remove the temporary log directory
        unless the server failed."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=self._stop_timeout)
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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
