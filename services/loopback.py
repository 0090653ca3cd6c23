"""Loopback networking shared by the local services (embedded Redis, local env gateway, tests)."""

import socket
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
PICKS = 5  # ports tried before a picked port that keeps being taken is an error
BIND_FAILED = "address already in use"  # what a server that could not bind its port logs (errno 98)


class PortTakenError(Exception):
    """A server could not have the loopback port picked for it (another process holds it)."""


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_on_picked_port(start: Callable[[bool], T], may_repick: bool, repick: Callable[[], None]) -> T:
    """``start(repick_allowed)``, which raises PortTakenError only when allowed to; each time it
    does, ``repick()`` another port and start again, ``PICKS`` tries in all. The last try is not
    allowed to, so its failure is the server's own error. A port that was given, not picked
    (``may_repick`` false), is tried once."""
    for _ in range(PICKS - 1):
        try:
            return start(may_repick)
        except PortTakenError:
            repick()
    return start(False)
