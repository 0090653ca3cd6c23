"""Feeds a TOML file's values into the settings tree at the lowest priority."""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource

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
