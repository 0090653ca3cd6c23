"""Bodies of the error answers of every TurnOPD HTTP app.  # any app -> its HTTP clients

Two shapes, documented on every route that can send them (``services.http_responses``):

- ``ErrorDetail``: one message. What an app's error table answers (404, 409, 503, a 422 for a
  request that is well-formed but refused, ...), and what Starlette's own HTTP errors carry.
- ``InvalidRequest``: the request did not parse into the route's models (422). FastAPI's
  ``HTTPValidationError`` shape, as ``services.http_validation`` writes it: ``input`` is kept only
  when it is a JSON scalar.

The env gateway adds a third for actions that are not admissible (``ActionRejected``).
"""

from pydantic import Field

from services.contracts.base import Contract


class ErrorDetail(Contract):
    """Body of an error answer: what went wrong, in one message."""

    detail: str = Field(description="What went wrong, naming the offending value where there is one.")


class InvalidField(Contract):
    """One part of a request that does not parse."""

    type: str = Field(description="The validation error's type, e.g. 'missing', 'int_type', 'json_invalid'.")
    loc: list[str | int] = Field(
        description="Where: 'body', 'query' or 'path', then field names and list indices."
    )
    msg: str = Field(description="What is wrong with it.")
    input: str | int | float | bool | None = Field(
        None, description="The offending value when it is a JSON scalar (absent otherwise)."
    )


class InvalidRequest(Contract):
    """Body of the 422 answer to a request that does not parse into the route's models."""

    detail: list[InvalidField] = Field(description="Every problem found, one per item.")
