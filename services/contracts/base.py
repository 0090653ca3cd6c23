"""The base class of every message that crosses a process boundary, and shared field types."""

from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    model_serializer,
)
from pydantic_core import PydanticCustomError

# Finite floats only: NaN or inf in a statistic is a bug upstream, never a value to carry along.
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
NonNegInt = Annotated[int, Field(ge=0)]
TokenId = Annotated[int, Field(ge=0)]
Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


def _integer_not_bool_or_text(value: object) -> object:
    if isinstance(value, bool | str | bytes):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


# Fields of request bodies parse as their JSON Schema reads them: an integer is 3 or 3.0, never
# true, "3" or 3.5; a boolean is true or false, never 0 or "yes". (Pydantic's lax mode takes true
# and "3" for integers and 0 for booleans; its strict mode refuses 3.0.) Bounds go before the
# validator: after it, the JSON schema would carry them as a non-standard `ge`, not `minimum`.
JsonInt = Annotated[int, BeforeValidator(_integer_not_bool_or_text)]
JsonNonNegInt = Annotated[int, Field(ge=0), BeforeValidator(_integer_not_bool_or_text)]
JsonPositiveInt = Annotated[int, Field(ge=1), BeforeValidator(_integer_not_bool_or_text)]
# A token id as our packed path carries it (int32): a larger one is refused, never overflowed later.
JsonTokenId = Annotated[int, Field(ge=0, lt=2**31), BeforeValidator(_integer_not_bool_or_text)]
JsonBool = Annotated[bool, Strict()]


class Contract(BaseModel):
    """Frozen, strict-shaped pydantic model: unknown fields are rejected, instances are immutable."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


class Record(Contract):
    """A line of a run's JSONL files whose ``LEFT_OUT_WHEN_NONE`` fields, added later, are left out
    of its JSON while None: a line written before they existed and one written since without them
    read and write the same."""

    LEFT_OUT_WHEN_NONE: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _left_out_when_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in self.LEFT_OUT_WHEN_NONE:
            if data.get(key) is None:
                data.pop(key, None)
        return data
