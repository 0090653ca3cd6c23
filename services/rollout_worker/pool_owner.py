"""One owner of the rollout pool's state at a time, and the inbox of the messages it applies (pure).

The thread that holds the owner's role is the only one that reads or changes the pool's members: a
``play`` holds it for its whole play and applies the inbox between chunks; when no play runs, the
caller of an operation takes the role and applies its own message (and any others queued). Every
other thread posts a message with a future for its answer and waits.

A message can be posted just as the owner lets go of the role, after its last look at the inbox: so
a poster never only waits, it keeps trying to take the role itself (``ask``) until its answer comes.
"""

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

M = TypeVar("M")

# how long a poster waits for its answer before it tries to take the role again
ASK_POLL_S = 0.05


class Owner(Generic[M]):
    """The owner's role (one lock) and the inbox of messages of type ``M``."""

    def __init__(self) -> None:
        self._role = threading.Lock()
        self._holder: int | None = None  # the thread holding the role
        self._inbox: queue.SimpleQueue[tuple[M, Future[Any]]] = queue.SimpleQueue()

    def post(self, message: M) -> "Future[Any]":
        """Queue ``message`` for the owner; its answer comes through the future."""
        answer: Future[Any] = Future()
        self._inbox.put((message, answer))
        return answer

    def ask(self, message: M, settle: Callable[[], None]) -> Any:
        """Post ``message`` and wait for its answer (its exception is raised here). Whenever no one
        holds the role, take it and run ``settle`` (the owner's loop: it applies the inbox)."""
        if self._holder == threading.get_ident():
            raise RuntimeError(
                "the pool's owner cannot wait for its own message (an operation from on_result?)"
            )
        answer = self.post(message)
        while not answer.done():
            if self._role.acquire(blocking=False):
                try:
                    self._holder = threading.get_ident()
                    settle()
                finally:
                    self._holder = None
                    self._role.release()
            else:
                wait([answer], timeout=ASK_POLL_S)
        return answer.result()

    @contextmanager
    def role(self) -> Iterator[None]:
        """Hold the owner's role (waiting while another thread holds it)."""
        with self._role:
            self._holder = threading.get_ident()
            try:
                yield
            finally:
                self._holder = None

    def take(self) -> list[tuple[M, "Future[Any]"]]:
        """The messages posted so far, oldest first (for the holder of the role)."""
        taken: list[tuple[M, Future[Any]]] = []
        while True:
            try:
                taken.append(self._inbox.get_nowait())
            except queue.Empty:
                return taken

    def inbox_empty(self) -> bool:
        return self._inbox.empty()
