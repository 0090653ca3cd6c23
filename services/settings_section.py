"""The base class of every settings section (its own module so section modules can import it
without importing the tree that imports them)."""

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator


class Section(BaseModel):
    """A settings section: unknown keys are errors, values are validated on assignment too.

    ``REMOVED`` maps keys a section once accepted (and never acted on) to why they are gone, so a
    config that still sets one fails with that reason instead of a bare "extra inputs" error.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    REMOVED: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _no_removed_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in sorted(set(data) & set(cls.REMOVED)):
                raise ValueError(f"{key!r} was removed: {cls.REMOVED[key]}; delete it from the config")
        return data
