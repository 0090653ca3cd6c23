"""The rules every restart keeps: service names, and a failed restart brings the old settings back."""

import pytest

from services.errors import InputError
from services.operations.restart_rules import service_kind, start_or_restore, worker_index
from services.settings import load_settings


def test_service_kinds_and_worker_index():
    assert service_kind("rollout-worker-3") == "rollout-worker" and worker_index("rollout-worker-3") == 3
    assert service_kind("rollout-pool") == "rollout-worker" and worker_index("rollout-pool") is None
    assert service_kind("teacher") == "teacher" and worker_index("teacher") is None
    with pytest.raises(InputError, match="unknown service 'database'"):
        service_kind("database")


def test_a_failed_start_with_new_settings_brings_the_old_ones_back_and_reraises():
    old = load_settings(None)
    new = old.model_copy(update={"run": old.run.model_copy(update={"seed": 7})})
    started: list[int] = []

    def start(settings):  # type: ignore[no-untyped-def]
        started.append(settings.run.seed)
        if settings.run.seed == 7:
            raise RuntimeError("the new process did not come up")

    with pytest.raises(RuntimeError, match="did not come up"):
        start_or_restore(start, new, old)
    assert started == [7, old.run.seed]  # tried the new settings, then started again as it was

    started.clear()
    assert start_or_restore(start, None, old) is old and started == [old.run.seed]


def test_a_failed_plain_restart_is_started_once_more_with_the_same_settings():
    """The old process is already gone (a replacement stops it first): one more start with the old
    settings brings the service back, and the first failure is still reported."""
    old = load_settings(None)
    calls: list[object] = []

    def flaky(settings):  # type: ignore[no-untyped-def]
        calls.append(settings)
        if len(calls) == 1:
            raise OSError("no resources")

    with pytest.raises(OSError, match="no resources"):
        start_or_restore(flaky, None, old)
    assert calls == [old, old]

    calls.clear()

    def broken(settings):  # type: ignore[no-untyped-def]
        calls.append(settings)
        raise OSError(f"attempt {len(calls)} failed")

    with pytest.raises(OSError, match="attempt 2 failed") as raised:
        start_or_restore(broken, None, old)
    assert calls == [old, old] and "attempt 1 failed" in str(raised.value.__context__)
