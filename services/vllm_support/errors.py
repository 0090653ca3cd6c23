"""vLLM's exceptions, translated once into ours at the engines' boundary.

vLLM 0.33 raises ``VLLMValidationError`` (a ``VLLMClientError``) for a request it rejects, and
``EngineDeadError`` (a ``VLLMServerError``) when its engine process has died; both are plain
``Exception`` subclasses. A failed ``collective_rpc`` comes back as a bare ``Exception`` carrying
the worker's message. The request's fault becomes ``InputError``; anything else means the engine
can no longer be trusted (``EngineBrokenError``: replace the process).
"""

import functools

from services.errors import EngineBrokenError, InputError, TurnOPDError


@functools.cache
def request_error_types() -> tuple[type[Exception], ...]:
    """Exception classes that blame the request: vLLM's client errors where importable, and
    ``ValueError`` (what vLLM raised for bad requests before its own hierarchy)."""
    try:
        from vllm.exceptions import VLLMClientError
    except ImportError:
        return (ValueError,)
    return (VLLMClientError, ValueError)


def translate(exc: Exception, what: str) -> TurnOPDError:
    """Our error for ``exc``, raised by vLLM while doing ``what``."""
    if isinstance(exc, TurnOPDError):
        return exc
    if isinstance(exc, request_error_types()):
        return InputError(f"{what}: vLLM rejected the request: {exc}")
    return EngineBrokenError(f"{what} failed: {type(exc).__name__}: {exc}")
