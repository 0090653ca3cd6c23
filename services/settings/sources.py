"""Feeds a TOML file's values into a settings root at the lowest priority; the roots' common base."""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

_FILE_VALUES: ContextVar[Mapping[str, Any] | None] = ContextVar("turnopd_file_values", default=None)


@contextmanager
def file_values(values: Mapping[str, Any]) -> Iterator[None]:
    """Make ``values`` (a parsed TOML document) the file source while the block runs."""
    token = _FILE_VALUES.set(values)
    try:
        yield
    finally:
        _FILE_VALUES.reset(token)


def file_settings_source(settings_cls: type[BaseSettings]) -> PydanticBaseSettingsSource:
    """The settings source holding the current file's values."""
    return InitSettingsSource(settings_cls, init_kwargs=dict(_FILE_VALUES.get() or {}))


class TomlSettings(BaseSettings):
    """A root of settings (a run's, a teacher recipe's): TOML file values, overridden by
    ``TURNOPD_SECTION__KEY`` environment variables, overridden by explicit values (CLI flags)."""

    model_config = SettingsConfigDict(
        env_prefix="TURNOPD_", env_nested_delimiter="__", extra="forbid", validate_assignment=True
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Priority, highest first: explicit overrides (CLI flags), environment, the TOML file.
        return (init_settings, env_settings, file_settings_source(settings_cls))
