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
