"""The learner's message boxes: one inbox per rank and one shared outbox, held by a single actor.

``Mailbox`` is plain asyncio (no Ray import); ``mailbox_client.start_mailbox`` runs it as one async Ray
actor on the driver's node. One actor for every box, where ``ray.util.queue.Queue`` starts an actor
per queue: each is a Python process that imports Ray, a cost every learner start paid per queue
(issue 36). ``services.learner.mailbox_client`` holds what the ranks and the orchestrator use.
"""

import asyncio
from typing import Any


class Mailbox:
    """``world`` inboxes (orchestrator -> rank) and one outbox (ranks -> orchestrator), unbounded FIFOs."""

    def __init__(self, world: int) -> None:
        if world < 1:
            raise ValueError(f"a mailbox needs at least one rank, got world={world}")
        self._inboxes: list[asyncio.Queue[Any]] = [asyncio.Queue() for _ in range(world)]
        self._outbox: asyncio.Queue[Any] = asyncio.Queue()

    def _box(self, rank: int | None) -> "asyncio.Queue[Any]":
        if rank is None:
            return self._outbox
        if not 0 <= rank < len(self._inboxes):
            raise ValueError(f"no inbox for rank {rank}: the learner has {len(self._inboxes)} ranks")
        return self._inboxes[rank]

    async def put(self, rank: int | None, message: Any) -> None:
        """Add ``message`` to rank ``rank``'s inbox, or to the outbox for ``None``."""
        self._box(rank).put_nowait(message)

    async def get(self, rank: int | None, timeout: float | None) -> list[Any]:
        """``[the oldest message of that box]``, waiting up to ``timeout`` seconds (``None``: for
        ever); ``[]`` when none came in time (an answer, not an error: a wait that runs out is how the
        orchestrator polls whether the ranks are still alive)."""
        box = self._box(rank)
        try:
            return [await asyncio.wait_for(box.get(), timeout)]
        except TimeoutError:
            return []

    async def sizes(self) -> list[int]:
        """Messages waiting in each inbox, then in the outbox."""
        return [q.qsize() for q in (*self._inboxes, self._outbox)]
