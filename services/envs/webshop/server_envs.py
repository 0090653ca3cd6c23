"""The envs of the project's own `agentenv_webshop`-protocol server: env index -> shop session.

As in AgentGym, ``create`` opens an env on a random goal and ``reset`` loads the goal whose id it
is given. Pure module: the HTTP shell is `services.envs.webshop.server`.
"""

import random

from services.envs.webshop.shop import Shop, ShopSession
from services.errors import NotFoundError, TurnOPDError


class ServerBusyError(TurnOPDError):
    """Every env slot of the server is taken (HTTP 503)."""


class ShopEnvs:
    def __init__(self, shop: Shop, max_envs: int, rng: random.Random | None = None) -> None:
        self.shop = shop
        self.max_envs = max_envs
        self._sessions: dict[int, ShopSession] = {}
        self._next = 0
        self._rng = rng or random.Random()

    def indices(self) -> list[int]:
        return sorted(self._sessions)

    def create(self) -> int:
        if len(self._sessions) >= self.max_envs:
            raise ServerBusyError(f"all {self.max_envs} envs are open; close one first")
        index, self._next = self._next, self._next + 1
        self._sessions[index] = self.shop.session(self._rng.randrange(self.shop.goals.splits.total))
        return index

    def get(self, index: int) -> ShopSession:
        try:
            return self._sessions[index]
        except KeyError:
            raise NotFoundError(f"no env {index} (never created, or closed)") from None

    def reset(self, index: int, goal_id: int | None) -> ShopSession:
        self.get(index)
        goal = goal_id if goal_id is not None else self._rng.randrange(self.shop.goals.splits.total)
        self._sessions[index] = self.shop.session(goal)
        return self._sessions[index]

    def close(self, index: int) -> bool:
        return self._sessions.pop(index, None) is not None
