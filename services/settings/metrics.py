"""Where the training driver exports its Prometheus metrics (controller, learner, rollout pool)."""

from pydantic import Field

from services.settings_section import Section


class MetricsSettings(Section):
    enabled: bool = Field(True, description="Serve /metrics from the `turnopd train` driver.")
    host: str = Field(
        "127.0.0.1",
        min_length=1,
        description="Bind address; beyond the loopback the service token is required (and demanded).",
    )
    port: int = Field(9464, ge=0, le=65535, description="Port of the driver's /metrics (0: any free port).")
