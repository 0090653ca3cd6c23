"""The typed settings tree (pydantic-settings) and its loader."""

from services.settings.loader import load_settings
from services.settings.tree import TurnOPDSettings

__all__ = ["TurnOPDSettings", "load_settings"]
