"""The run-control actor's body: status, the restart queue, results, closing."""

import pytest

from services.contracts.operations import RestartRequest, RestartResult
from services.errors import ConflictError, NotFoundError
from services.operations.run_control import RunControl


def request(rid: str, service: str = "teacher") -> RestartRequest:
    return RestartRequest(request_id=rid, service=service)


def result(rid: str, ok: bool = True) -> RestartResult:
    return RestartResult(
        request_id=rid, service="teacher", ok=ok, message="m", started_at=0.0, seconds=1.0, step=2
    )


def test_requests_come_out_once_in_order_and_results_are_kept():
    control = RunControl()
    assert control.status() is None and control.take() == []
    control.submit(request("a"))
    control.submit(request("b", "learner"))
    assert [r.request_id for r in control.take()] == ["a", "b"]
    assert control.take() == []
    assert control.result("a") is None
    control.complete(result("a"))
    assert control.result("a") == result("a")
    with pytest.raises(ConflictError, match="already filed"):
        control.submit(request("a"))


def test_unknown_ids_are_not_found_until_the_driver_reports_them():
    control = RunControl()
    with pytest.raises(NotFoundError):
        control.result("nope")
    # a restart nobody filed here (the driver's watchdog), or filed before Ray restarted this actor
    control.complete(result("watchdog-redis-1"))
    assert control.result("watchdog-redis-1") == result("watchdog-redis-1")


def test_close_returns_the_queue_and_refuses_more():
    control = RunControl()
    control.submit(request("a"))
    assert [r.request_id for r in control.close()] == ["a"]
    with pytest.raises(ConflictError, match="no more restart requests"):
        control.submit(request("b"))
    control.complete(result("a", ok=False))  # the driver still answers what was left
    assert control.result("a").ok is False
