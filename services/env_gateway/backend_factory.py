"""Backend factory keyed by the env name.

The service token is the gateway's own: the backends that reach a server of their own (the
search env's retrieval server, a remote webshop) send it there as their bearer.
"""

from typing import get_args

from services.contracts.env_gateway import EnvName
from services.envs.alfworld.backend import AlfworldBackend
from services.envs.backend import EnvBackend
from services.envs.search.backend import SearchBackend
from services.envs.textworld.backend import TextWorldBackend
from services.envs.webshop.backend import WebShopBackend
from services.settings.env_gateway import EnvGatewaySettings

ENV_NAMES: tuple[EnvName, ...] = get_args(EnvName)


def make_backend(name: EnvName, settings: EnvGatewaySettings, *, service_token: str | None) -> EnvBackend:
    """The backend serving ``name``; constructing one loads no game and starts no engine.
    ``service_token``: the bearer its remote servers demand (None: the run has none)."""
    match name:
        case "alfworld":
            return AlfworldBackend(
                settings.household, settings.resolved_cache_dir(), settings.resolved_alfworld_data()
            )
        case "textworld":
            return TextWorldBackend(settings.textworld, settings.resolved_cache_dir())
        case "search":
            return SearchBackend(settings.search, settings.resolved_cache_dir(), service_token)
        case "webshop":
            return WebShopBackend(settings.webshop, settings.resolved_cache_dir(), service_token)
        case _:
            raise ValueError(f"unknown env {name!r}; known: {list(ENV_NAMES)}")
