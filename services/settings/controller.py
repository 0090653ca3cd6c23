"""Settings of the controller service and its Redis state store."""

from pathlib import Path

from pydantic import Field, SecretStr

from services.settings.section import Section


class ControllerSettings(Section):
    redis_url: str | None = Field(
        None,
        description="Redis holding the controller state (REDIS_URL also works); unset: spawn an "
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
