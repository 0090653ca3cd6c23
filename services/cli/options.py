"""Shared CLI option handling: the settings from --config plus flag overrides."""

from collections.abc import Collection
from pathlib import Path
from typing import Any

from services.settings import TurnOPDSettings
from services.settings.loader import load_recipe, load_settings
from services.settings.recipe import TeacherRecipeSettings


def _given(sections: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The flags that were given (non-None), by section; sections with none left out."""
    overrides = {
        name: {k: v for k, v in values.items() if v is not None} for name, values in sections.items()
    }
    return {name: values for name, values in overrides.items() if values}


def settings_with(
    config: Path | None, sections: Collection[str] | None = None, **flags: dict[str, Any]
) -> TurnOPDSettings:
    """A run's settings from ``config`` (or defaults; only ``sections`` of the file if given) with
    the flags that were given (non-None)."""
    return load_settings(config, _given(flags), sections)


def recipe_with(config: Path | None, **flags: dict[str, Any]) -> TeacherRecipeSettings:
    """A teacher-training recipe from ``config`` (or defaults) with the flags that were given."""
    return load_recipe(config, _given(flags))
