"""The base class of every settings section (its own module so section modules can import it
without importing the tree that imports them)."""

from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, model_validator


class Section(BaseModel):
    """A settings section: unknown keys are errors, values are validated on assignment too.

    ``REMOVED`` maps keys a section once accepted (and never acted on) to why they are gone, so a
    config that still sets one fails with that reason instead of a bare "extra inputs" error.
    ``RUN_DEFINING`` names the fields that identify the run: a service restarted with a new config
    takes the section from it but keeps these (``restarted``).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    REMOVED: ClassVar[dict[str, str]] = {}
    RUN_DEFINING: ClassVar[frozenset[str]] = frozenset()

    def restarted(self, new: Self) -> Self:
        """``new`` with this section's run-defining fields kept."""
        return new.model_copy(update={name: getattr(self, name) for name in self.RUN_DEFINING})

    @model_validator(mode="before")
    @classmethod
    def _no_removed_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in sorted(set(data) & set(cls.REMOVED)):
                raise ValueError(f"{key!r} was removed: {cls.REMOVED[key]}; delete it from the config")
        return data
