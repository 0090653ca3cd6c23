"""Standalone entry: serve the gateway app with uvicorn (`turnopd serve env-gateway`)."""

import uvicorn

from services.env_gateway.app import create_app
from services.service_auth import check_bind
from services.settings.env_gateway import EnvGatewaySettings


def serve(settings: EnvGatewaySettings, token: str | None = None) -> None:
    """Run one gateway replica until interrupted; beyond the loopback only with a ``token``."""
    check_bind(settings.host, token, "env gateway")
    app = create_app(settings, token=token)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info")
