"""The envs of the agentenv_webshop-protocol server: create, reset to a goal, capacity, unknown envs."""

import random

import pytest

from services.envs.webshop.server_envs import ServerBusyError, ShopEnvs
from services.errors import InputError, NotFoundError


def test_envs_are_created_reset_to_goals_and_closed(shop):
    envs = ShopEnvs(shop, max_envs=2, rng=random.Random(0))
    first, second = envs.create(), envs.create()
    assert (first, second) == (0, 1) and envs.indices() == [0, 1]
    with pytest.raises(ServerBusyError, match="all 2 envs are open"):
        envs.create()
    session = envs.reset(first, 205)
    assert session.goal.goal_id == 205 and envs.get(first) is session
    assert envs.close(first) and not envs.close(first)
    assert envs.create() == 2  # indices are never reused
    with pytest.raises(NotFoundError, match="no env 0"):
        envs.get(0)
    with pytest.raises(InputError, match="outside the shop's goals"):
        envs.reset(1, 3200)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_envs_unused_past_their_ttl_expire_so_a_crashed_client_cannot_fill_the_server(shop):
    clock = Clock()
    envs = ShopEnvs(shop, max_envs=2, rng=random.Random(0), ttl_s=60.0, clock=clock)
    crashed, alive = envs.create(), envs.create()
    clock.now = 50.0
    envs.get(alive)  # used: its 60 s start again
    with pytest.raises(ServerBusyError, match=r"all 2 envs are open and used within 60s"):
        envs.create()
    clock.now = 61.0  # the crashed client's env has been unused for 61 s
    assert envs.create() == 2
    assert envs.indices() == [alive, 2]
    with pytest.raises(NotFoundError, match=r"no env 0 \(never created, closed, or unused for over 60s\)"):
        envs.get(crashed)
    clock.now = 111.5  # alive: unused since 50 s
    with pytest.raises(NotFoundError, match="no env 1"):
        envs.get(alive)
    assert envs.indices() == [2]
    assert envs.reclaim_idle() == [] and not envs.close(alive)
