import threading
import time

import pytest

from services.operations.start_together import start_together, stop_together


def test_services_that_need_nothing_start_at_the_same_time():
    both_in = threading.Barrier(2, timeout=5)  # broken unless both starts run at once
    started: list[str] = []

    def start(item: str) -> None:
        both_in.wait()
        started.append(item)

    start_together(["teacher", "learner"], start, {})
    assert sorted(started) == ["learner", "teacher"]


def test_a_service_starts_only_after_what_it_needs_is_up():
    events: list[str] = []

    def start(item: str) -> None:
        events.append(f"{item} begins")
        if item == "redis":
            time.sleep(0.2)
        events.append(f"{item} up")

    start_together(["redis", "controller", "learner"], start, {"controller": ["redis"]})
    assert events.index("controller begins") > events.index("redis up")
    assert events.index("learner begins") < events.index("redis up")  # not held back by redis
    assert len(events) == 6


def test_a_failed_start_is_raised_after_the_others_and_what_needed_it_never_starts():
    started: list[str] = []

    def start(item: str) -> None:
        if item == "gateway":
            raise OSError("port 8100 in use")
        if item == "learner":
            time.sleep(0.2)  # still starting when the gateway fails: waited for, not abandoned
        started.append(item)

    with pytest.raises(OSError, match="port 8100 in use") as raised:
        start_together(["gateway", "pool", "learner"], start, {"pool": ["gateway"]})
    assert started == ["learner"]  # the pool needed the gateway
    assert not getattr(raised.value, "__notes__", None)  # the pool's skip is no second failure


def test_every_failure_is_reported_the_first_in_start_order_raised():
    def start(item: str) -> None:
        if item == "learner":
            time.sleep(0.1)  # fails last in time, but comes first in order
            raise RuntimeError("learner workers stopped")
        if item == "teacher":
            raise ValueError("no checkpoint at /models/teacher")

    with pytest.raises(RuntimeError, match="learner workers stopped") as raised:
        start_together(["learner", "teacher"], start, {})
    assert raised.value.__notes__ == [
        "also while starting teacher: ValueError: no checkpoint at /models/teacher"
    ]


def test_a_need_listed_after_its_service_is_refused_before_anything_starts():
    started: list[str] = []
    with pytest.raises(ValueError, match="pool needs gateway, which must come before it"):
        start_together(["redis", "pool", "gateway"], started.append, {"pool": ["gateway"]})
    assert started == []


START_ORDER = ["redis", "controller", "gateway", "teacher", "pool", "learner"]
NEEDS = {"controller": ["redis"], "pool": ["gateway"]}


def test_services_stop_once_what_needs_them_has_stopped_the_rest_at_once():
    events: list[str] = []
    both_in = threading.Barrier(2, timeout=5)  # the teacher and the learner stop at the same time

    def stop(item: str) -> None:
        events.append(f"{item} stopping")
        if item in ("teacher", "learner"):
            both_in.wait()
        if item == "pool":
            time.sleep(0.1)
        events.append(f"{item} down")

    stop_together(START_ORDER, stop, NEEDS)
    assert events.index("gateway stopping") > events.index("pool down")
    assert events.index("redis stopping") > events.index("controller down")
    assert len(events) == 12


def test_a_failed_stop_still_stops_what_it_needed_and_is_raised():
    stopped: list[str] = []

    def stop(item: str) -> None:
        if item == "pool":
            raise TimeoutError("rollout-worker-1 did not stop in 30 s")
        stopped.append(item)

    with pytest.raises(TimeoutError, match="rollout-worker-1"):
        stop_together(START_ORDER, stop, NEEDS)
    assert sorted(stopped) == ["controller", "gateway", "learner", "redis", "teacher"]


def test_a_failure_is_logged_when_it_happens_not_only_when_raised(caplog):
    said_before_the_others_ended: list[bool] = []
    learner_may_end = threading.Event()

    def start(item: str) -> None:
        if item == "redis":
            raise OSError("redis-server exited: port 6379 in use")
        learner_may_end.wait(timeout=5)  # the learner still starting while redis fails
        said_before_the_others_ended.append("starting redis failed: OSError" in caplog.text)

    with caplog.at_level("ERROR"), pytest.raises(OSError):
        threading.Timer(0.3, learner_may_end.set).start()
        start_together(["redis", "learner"], start, {})
    assert said_before_the_others_ended == [True]
