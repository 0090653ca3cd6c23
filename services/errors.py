"""One exception hierarchy for TurnOPD.

Each class also subclasses the stdlib error it stands for, so callers that only know
``ValueError`` or ``LookupError`` still catch it, and every class stays picklable (Ray moves
exceptions between processes). Boundaries (CLI, HTTP routes, actors) translate these once.
"""


class TurnOPDError(Exception):
    """Base class of every error TurnOPD raises on purpose."""


class InputError(TurnOPDError, ValueError):
    """Input data (a file, a request, a record) is malformed or inconsistent."""


class ConfigError(TurnOPDError, ValueError):
    """A configuration value is invalid; the message names the key."""


class NotFoundError(TurnOPDError, LookupError):
    """A named thing (episode, checkpoint, run) does not exist."""


class ConflictError(TurnOPDError, RuntimeError):
    """The request is valid but the target's state forbids it (e.g. a finished episode)."""


class EngineBrokenError(TurnOPDError, RuntimeError):
    """An inference engine failed on valid input (dead engine process, device error, weights left
    half-loaded): it cannot serve any more and its process must be replaced."""
