"""The envs of the project's own `agentenv_webshop`-protocol server: env index -> shop session.

As in AgentGym, ``create`` opens an env on a random goal and ``reset`` loads the goal whose id it
is given. An env not used for ``ttl_s`` seconds expires: it is closed (its index answers 404), so
clients that crashed without ``/close`` never fill the server for good. Pure module: the HTTP shell is
`services.envs.webshop.server`.
"""

import random
import time
from collections.abc import Callable

from services.envs.webshop.shop import Shop, ShopSession
from services.errors import NotFoundError, TurnOPDError


class ServerBusyError(TurnOPDError):
    """Every env slot of the server is taken by an env used within its TTL (HTTP 503)."""


class ShopEnvs:
    def __init__(
        self,
        shop: Shop,
        max_envs: int,
        rng: random.Random | None = None,
        ttl_s: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.shop = shop
        self.max_envs = max_envs
        self.ttl_s = ttl_s
        self._clock = clock
        self._sessions: dict[int, ShopSession] = {}
        self._last_used: dict[int, float] = {}
        self._next = 0
        self._rng = rng or random.Random()

    def indices(self) -> list[int]:
        self.reclaim_idle()
        return sorted(self._sessions)

    def create(self) -> int:
        self.reclaim_idle()
        if len(self._sessions) >= self.max_envs:
            raise ServerBusyError(
                f"all {self.max_envs} envs are open and used within {self.ttl_s:g}s; close one first"
            )
        index, self._next = self._next, self._next + 1
        self._sessions[index] = self.shop.session(self._rng.randrange(self.shop.goals.splits.total))
        self._last_used[index] = self._clock()
        return index

    def reclaim_idle(self) -> list[int]:
        """Close every env unused for longer than ``ttl_s``; the indices closed."""
        now = self._clock()
        idle = [index for index, used in self._last_used.items() if now - used > self.ttl_s]
        for index in idle:
            self.close(index)
        return idle

    def get(self, index: int) -> ShopSession:
        now = self._clock()
        if index in self._sessions and now - self._last_used[index] > self.ttl_s:
            self.close(index)
        if index not in self._sessions:
            raise NotFoundError(f"no env {index} (never created, closed, or unused for over {self.ttl_s:g}s)")
        self._last_used[index] = now
        return self._sessions[index]

    def reset(self, index: int, goal_id: int | None) -> ShopSession:
        self.get(index)
        goal = goal_id if goal_id is not None else self._rng.randrange(self.shop.goals.splits.total)
        self._sessions[index] = self.shop.session(goal)
        return self._sessions[index]

    def close(self, index: int) -> bool:
        self._last_used.pop(index, None)
        return self._sessions.pop(index, None) is not None
