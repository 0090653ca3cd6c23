"""Shared CLI option handling: the settings tree from --config plus flag overrides."""

from pathlib import Path
from typing import Any

from services.settings import TurnOPDSettings, load_settings


def settings_with(config: Path | None, **sections: dict[str, Any]) -> TurnOPDSettings:
    """Load settings from ``config`` (or defaults) and apply the flags that were given (non-None)."""
    overrides = {
        name: {k: v for k, v in values.items() if v is not None} for name, values in sections.items()
    }
    return load_settings(config, {name: values for name, values in overrides.items() if values})
