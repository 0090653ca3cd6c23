"""What every Serve config builder (``import_path: ...serve_app:build_app``) does first: check its
``args:`` block, load the run config it names, and require the service token, since a Serve proxy
on a cluster listens on every interface."""

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
