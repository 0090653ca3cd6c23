"""Calls that block (a Ray ``get``, a file append) made from the driver's event loop without stopping it.

Each call runs on a daemon thread of its own and resolves a future on the loop when it returns.
Daemon, not the default executor's: a run that stops (Ctrl-C, a learner that cannot be replaced)
must not wait at exit for a rollout still playing; the services' shutdown ends that call.

``OffLoop`` also remembers its calls in flight: a lane cancelled while its call runs on leaves the
call to finish, and ``drain`` waits for it (the rollout pool takes one play at a time, so a run
that goes on after a failure first lets the play it abandoned end).
"""

import asyncio
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


def _started(call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> "asyncio.Future[T]":
    """A future of the running loop settled with ``call(*args, **kwargs)`` run on a thread of its own."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not future.done():  # a cancelled wait leaves nothing to settle
            outcome()

    def run() -> None:
        try:
            value = call(*args, **kwargs)
        except BaseException as exc:
            error = exc
            outcome: Callable[[], None] = lambda: future.set_exception(error)  # noqa: E731
        else:
            outcome = lambda: future.set_result(value)  # noqa: E731
        with suppress(RuntimeError):  # the loop closed before the call returned: the run already stopped
            loop.call_soon_threadsafe(settle, outcome)

    name = getattr(call, "__qualname__", "call")
    threading.Thread(target=run, name=f"blocking-{name}", daemon=True).start()
    return future


async def blocking(call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``call(*args, **kwargs)`` on a thread of its own; its result (or exception) here."""
    return await _started(call, *args, **kwargs)


def _retrieved(future: "asyncio.Future[Any]") -> None:
    """Mark an abandoned call's exception as seen: its caller was cancelled, the run reports its own."""
    if not future.cancelled():
        future.exception()


class OffLoop:
    """Blocking calls whose end a cancelled caller can still wait for (``drain``)."""

    def __init__(self) -> None:
        self._in_flight: set[asyncio.Future[Any]] = set()

    async def call(self, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        future = _started(call, *args, **kwargs)
        self._in_flight.add(future)
        future.add_done_callback(self._in_flight.discard)
        future.add_done_callback(_retrieved)
        return await asyncio.shield(future)

    async def drain(self) -> None:
        """Wait until every call started here has returned (their outcomes are dropped)."""
        while self._in_flight:
            await asyncio.gather(*self._in_flight, return_exceptions=True)
