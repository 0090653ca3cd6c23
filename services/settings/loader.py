"""Load the settings tree from TOML + environment + overrides; errors name the offending key."""

import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from services.errors import ConfigError
from services.settings.recipe import TeacherRecipeSettings
from services.settings.sources import TomlSettings, file_values
from services.settings.tree import TurnOPDSettings


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML config file, turning I/O and syntax problems into one-line ConfigErrors."""
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None


def describe_validation_error(exc: ValidationError) -> str:
    """Render a pydantic error as '<dotted.key>: <problem> (got <value>)'; several joined by '; '."""
    parts = []
    for err in exc.errors():
        msg = str(err["msg"]).removeprefix("Value error, ")
        if not err["loc"]:  # a check across sections: its message names the keys
            parts.append(msg)
            continue
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        got = f" (got {err['input']!r})" if err["type"] not in ("extra_forbidden", "missing") else ""
        parts.append(f"{'.'.join(str(p) for p in err['loc'])}: {msg}{got}")
    return "; ".join(parts)


Root = TypeVar("Root", bound=TomlSettings)


def load_tree(
    root: type[Root],
    path: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    sections: Collection[str] | None = None,
) -> Root:
    """Build a settings root: ``overrides`` beat ``TURNOPD_SECTION__KEY`` env vars, which beat the
    file. ``sections``: read only these sections of the file (a service that needs only its own)."""
    values = read_toml(path) if path is not None else {}
    if sections is not None:
        values = {name: value for name, value in values.items() if name in sections}
    try:
        with file_values(values):
            init: dict[str, Any] = {
                k: dict(v) if isinstance(v, Mapping) else v for k, v in (overrides or {}).items()
            }
            return root(**init)
    except ValidationError as exc:
        where = f" in {path}" if path is not None else ""
        raise ConfigError(f"invalid settings{where}: {describe_validation_error(exc)}") from None


def load_settings(
    path: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    sections: Collection[str] | None = None,
) -> TurnOPDSettings:
    """A run's settings (``load_tree``)."""
    return load_tree(TurnOPDSettings, path, overrides, sections)


def load_recipe(
    path: Path | None = None, overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> TeacherRecipeSettings:
    """A teacher-training recipe's settings (``load_tree``)."""
    return load_tree(TeacherRecipeSettings, path, overrides)
