"""Calls that block (a Ray ``get``, a file append) made from the driver's event loop without stopping it.

Each call runs on a daemon thread of its own and resolves a future on the loop when it returns.
Daemon, not the default executor's: a run that stops (a failed update, Ctrl-C) must not wait at
exit for a rollout still playing; the services' shutdown ends that call.
"""

import asyncio
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def blocking(call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``call(*args, **kwargs)`` on a thread of its own; its result (or exception) here."""
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
            loop.call_soon_threadsafe(settle, lambda: future.set_exception(error))
        else:
            loop.call_soon_threadsafe(settle, lambda: future.set_result(value))

    name = getattr(call, "__qualname__", "call")
    threading.Thread(target=_closed_loop_safe(run), name=f"blocking-{name}", daemon=True).start()
    return await future


def _closed_loop_safe(run: Callable[[], None]) -> Callable[[], None]:
    """``run``, quiet where the loop closed before the call returned (the run already stopped)."""

    def guarded() -> None:
        try:
            run()
        except RuntimeError as exc:  # call_soon_threadsafe on a closed loop
            if "closed" not in str(exc):
                raise

    return guarded
