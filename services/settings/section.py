"""The base class of every settings section (its own module so section modules can import it
without importing the tree that imports them)."""

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A settings section: unknown keys are errors, values are validated on assignment too."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
