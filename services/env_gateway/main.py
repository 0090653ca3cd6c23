"""Standalone entry: serve the gateway app with uvicorn (`turnopd serve env-gateway`)."""

import uvicorn

from services.env_gateway.app import create_app
from services.settings.env_gateway import EnvGatewaySettings


def serve(settings: EnvGatewaySettings) -> None:
    """Run one gateway replica until interrupted."""
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="info")
