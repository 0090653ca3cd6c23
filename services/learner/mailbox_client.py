"""Blocking, queue-like views of one box of the learner's mailbox actor (``services.learner.mailbox``).

``RankInbox`` is what the orchestrator sends one rank; ``SharedOutbox`` what every rank answers.
Each is the actor's handle plus which box, so it travels to the Ray Train workers in their config.
"""

from typing import Any

import ray

from services.learner.mailbox import Mailbox


class MailboxTimeout(TimeoutError):
    """Nothing arrived in the box within the wait."""


class _Box:
    """One box of a mailbox actor, used like a queue (blocking calls; ``rank`` None is the outbox)."""

    def __init__(self, actor: Any, rank: int | None) -> None:
        self.actor, self.rank = actor, rank

    def put(self, message: Any) -> None:
        ray.get(self.actor.put.remote(self.rank, message))

    def get(self, timeout: float | None = None) -> Any:
        """The next message; ``MailboxTimeout`` when none came within ``timeout`` seconds."""
        got: list[Any] = ray.get(self.actor.get.remote(self.rank, timeout))
        if not got:
            raise MailboxTimeout(f"no message in {timeout} s")
        return got[0]


class RankInbox(_Box):
    """Rank ``rank``'s inbox: what the orchestrator sends that rank."""

    def __init__(self, actor: Any, rank: int) -> None:
        super().__init__(actor, rank)


class SharedOutbox(_Box):
    """The ranks' shared outbox: what they answer the orchestrator."""

    def __init__(self, actor: Any) -> None:
        super().__init__(actor, None)


def start_mailbox(world: int, actor_options: dict[str, Any]) -> tuple[Any, list[RankInbox], SharedOutbox]:
    """One ``Mailbox`` actor (async: a rank's blocked ``get`` holds no other call) with ``world`` inboxes;
    the actor, each rank's inbox and the shared outbox."""
    actor = ray.remote(Mailbox).options(num_cpus=0, **actor_options).remote(world)
    return actor, [RankInbox(actor, rank) for rank in range(world)], SharedOutbox(actor)
