"""The base class of every message that crosses a process boundary."""

from pydantic import BaseModel, ConfigDict


class Contract(BaseModel):
    """Frozen, strict-shaped pydantic model: unknown fields are rejected, instances are immutable."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)
