"""Settings of the controller service and its Redis state store."""

import os
from pathlib import Path

from pydantic import Field, SecretStr

from services.settings_section import Section


class ControllerSettings(Section):
    # Same Redis, same state: a restart never moves the controller's store.
    RUN_DEFINING = frozenset({"redis_url", "redis_password", "embedded_redis_dir"})

    redis_url: str | None = Field(
        None,
        description="Redis holding the controller state (default: $REDIS_URL); unset: spawn an "
        "embedded redis-server on a free loopback port, persisting to <run_dir>/redis.",
    )
    redis_password: SecretStr | None = Field(
        None, description="Password for the embedded redis-server (required outside the embedded default)."
    )
    redis_start_timeout_s: float = Field(
        10.0, gt=0.0, description="How long to wait for redis-server to answer."
    )
    embedded_redis_dir: Path | None = Field(
        None, description="Where the embedded Redis keeps its AOF (default: run dir)."
    )

    def resolved_redis_url(self) -> str | None:
        """An external Redis: this setting, else $REDIS_URL read now; None: the run's embedded one."""
        return self.redis_url or os.environ.get("REDIS_URL") or None
