"""A standalone env gateway in a child process (`turnopd serve env-gateway` on a free loopback port).

Commands that need a gateway and were given no URL (`turnopd eval`, tests) start one this way:
a separate process keeps the env worker pool out of the caller's (and Ray's) process, and the
gateway's output goes to a log file whose tail is shown if it fails to come up.

A run's gateway is given its settings object instead of a config file: the ``[env_gateway]``
section goes to a file beside the log (``<log>.settings.json``) that the process reads with
``--settings``, and the service token goes into its environment, never into argv or the file. So
the process plays exactly what the run's settings say, on a fresh run, a resumed one (whose
settings come from its ``config.json``) and after a restart alike.
"""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Self

from services.child_server import ChildServer
from services.service_auth import TOKEN_ENV
from services.settings.per_service import EnvGatewayServiceSettings


class LocalGateway(ChildServer):
    """``with LocalGateway(config) as gateway: ... gateway.url ...``; stopped (SIGINT) on exit.

    ``config``: a TOML file the process reads itself; ``settings``: the gateway's settings object
    (a run's); at most one of them (neither: the defaults and the environment). ``port``: where it
    listens on 127.0.0.1 (None or 0: a free port). ``log_path``: where the server's output goes;
    without one it goes to a fresh temporary directory, removed again by a clean ``stop`` and kept
    (its path in the error) when the server failed to come up.
    """

    label = "env gateway"
    port_setting = "[env_gateway] port (TURNOPD_ENV_GATEWAY__PORT; 0: any free port)"
    log_name = "gateway.log"
    scratch_prefix = "turnopd-gateway-"

    def __init__(
        self,
        config: Path | None = None,
        *,
        settings: EnvGatewayServiceSettings | None = None,
        workers: int | None = None,
        startup_timeout_s: float = 600.0,
        log_path: Path | None = None,
        port: int | None = None,
    ) -> None:
        if config is not None and settings is not None:
            raise ValueError("give the env gateway a config file or a settings object, not both")
        super().__init__(startup_timeout_s=startup_timeout_s, log_path=log_path, port=port)
        self._config = config
        self._settings = settings
        self._workers = workers

    @property
    def settings_path(self) -> Path:
        """Where the ``[env_gateway]`` section of ``settings`` is written for the process to read."""
        return self.log_path.with_suffix(".settings.json")

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "services.cli", "serve", "env-gateway"]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        if self._workers is not None:
            command += ["--workers", str(self._workers)]
        if self._config is not None:
            command += ["--config", str(self._config)]
        if self._settings is not None:
            command += ["--settings", str(self.settings_path)]
        return command

    def environment(self) -> dict[str, str]:
        env = super().environment()
        token = self._settings.service_token if self._settings is not None else None
        if token is not None:
            env[TOKEN_ENV] = token.get_secret_value()
        return env

    def start(self, on_wait: Callable[[], None] | None = None) -> Self:
        if self._settings is not None:
            self.settings_path.parent.mkdir(parents=True, exist_ok=True)
            self.settings_path.write_text(self._settings.env_gateway.model_dump_json(indent=2))
        return super().start(on_wait)
