"""The controller refuses a Redis beyond the loopback that has no password (before Ray is touched)."""

import pytest

from services.controller.actor import start_controller
from services.errors import ConfigError
from services.settings.tree import TurnOPDSettings


def test_remote_redis_without_password_is_refused():
    with pytest.raises(ConfigError, match=r"Redis at redis\.example has no password"):
        start_controller(TurnOPDSettings().for_controllers(), False, "run-1", "redis://redis.example:6379/0")
