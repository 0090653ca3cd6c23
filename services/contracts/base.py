"""The base class of every message that crosses a process boundary, and shared field types."""

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

# Finite floats only: NaN or inf in a statistic is a bug upstream, never a value to carry along.
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
NonNegInt = Annotated[int, Field(ge=0)]
TokenId = Annotated[int, Field(ge=0)]
Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


class Contract(BaseModel):
    """Frozen, strict-shaped pydantic model: unknown fields are rejected, instances are immutable."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)
