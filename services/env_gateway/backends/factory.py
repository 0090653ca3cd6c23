"""Backend factory keyed by the env name."""

from typing import get_args

from services.contracts.env_gateway import EnvName
from services.env_gateway.backends.alfworld import AlfworldBackend
from services.env_gateway.backends.base import EnvBackend
from services.env_gateway.backends.search import SearchBackend
from services.env_gateway.backends.textworld_games import TextWorldBackend
from services.env_gateway.backends.webshop import WebShopBackend
from services.settings.env_gateway import EnvGatewaySettings

ENV_NAMES: tuple[EnvName, ...] = get_args(EnvName)


def make_backend(name: EnvName, settings: EnvGatewaySettings) -> EnvBackend:
    """The backend serving ``name``; constructing one loads no game and starts no engine."""
    match name:
        case "alfworld":
            return AlfworldBackend(settings)
        case "textworld":
            return TextWorldBackend(settings.textworld, settings.resolved_cache_dir())
        case "search":
            return SearchBackend(settings.search, settings.resolved_cache_dir())
        case "webshop":
            return WebShopBackend(settings)
        case _:
            raise ValueError(f"unknown env {name!r}; known: {list(ENV_NAMES)}")
