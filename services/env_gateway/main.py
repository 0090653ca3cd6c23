"""Standalone entry: serve the gateway app with uvicorn (`turnopd serve env-gateway`)."""

from services.env_gateway.app import create_app
from services.http_server import run_http_server
from services.settings.env_gateway import EnvGatewaySettings


def serve(settings: EnvGatewaySettings, token: str | None = None) -> None:
    """Run one gateway replica until interrupted; beyond the loopback only with a ``token``."""
    run_http_server(create_app(settings, token=token), settings.host, settings.port, token, "env gateway")
