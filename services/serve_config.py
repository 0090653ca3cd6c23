"""What every Serve config builder (``import_path: ...serve_app:build_app``) does first: check its
``args:`` block, load the run config it names, and require the service token, since a Serve proxy
on a cluster listens on every interface. A run that deploys an app with ``serve.run`` applies the
same rule to wherever the cluster's proxy listens (``check_serve_proxy``)."""

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from services.errors import ConfigError
from services.service_auth import check_bind
from services.settings.loader import describe_validation_error, load_settings
from services.settings.tree import TurnOPDSettings


class ServeAppArgs(BaseModel):
    """The ``args:`` block every builder takes: the run config to load (None: the defaults)."""

    model_config = ConfigDict(extra="forbid")

    config_path: Path | None = None


Args = TypeVar("Args", bound=ServeAppArgs)


def load_app_args(
    args: dict[str, Any], schema: type[Args], app: str
) -> tuple[Args, TurnOPDSettings, str | None]:
    """``args`` checked against ``schema`` (ConfigError naming ``app`` and the key), the settings of
    its ``config_path``, and the service token (ConfigError if there is none)."""
    try:
        parsed = schema.model_validate(args)
    except ValidationError as exc:
        raise ConfigError(f"{app} app args: {describe_validation_error(exc)}") from None
    settings = load_settings(parsed.config_path)
    token = settings.security.resolved_service_token()
    check_bind("0.0.0.0", token, f"{app} app of a Serve config")
    return parsed, settings, token


def serve_proxy_host() -> str:
    """Where this Ray cluster's Serve proxy listens: the running Serve's HTTP host, else the host
    ``serve.run`` would start it on (Serve's default, or ``RAY_SERVE_DEFAULT_HTTP_HOST``)."""
    from ray.serve.config import HTTPOptions
    from ray.serve.context import _get_global_client

    client = _get_global_client(raise_if_no_controller_running=False)
    options: HTTPOptions = client.http_config if client is not None else HTTPOptions()
    return options.host or "127.0.0.1"  # no host: Serve starts no proxy, nothing listens


def check_serve_proxy(token: str | None, app: str) -> None:
    """Refuse to deploy ``app`` behind a Serve proxy reachable beyond the loopback without a token."""
    check_bind(serve_proxy_host(), token, f"{app} app (behind the Serve proxy)")
