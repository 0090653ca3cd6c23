"""A worker Ray restarts: "unavailable" answers (still restarting) are waited out until the
deadline, "died" answers give it up after a few polls; no Ray cluster (placeholder handles)."""

from typing import Any

from ray.exceptions import ActorDiedError, ActorUnavailableError

from services.rollout_worker.pool_members import Member, Published, Roster
from services.rollout_worker.pool_stats import PoolStats
from services.rollout_worker.worker_starts import _DEAD_POLLS, WorkerStarts
from services.settings import load_settings

OWN = load_settings(None).for_rollout_worker()


class _Call:
    def remote(self, *args: Any) -> object:
        return object()


class Handle:
    ready = weights_version = load_weights = _Call()


def recovering() -> tuple[WorkerStarts, Roster]:
    roster = Roster([Member(Handle(), OWN, "incarnation")])
    starts = WorkerStarts(
        roster, PoolStats(), "student", lambda: Published(None, 0), lambda: "http://x", lambda: 120.0
    )
    starts.recover(0)
    return starts, roster


def test_unavailable_answers_while_ray_restarts_the_worker_do_not_give_it_up():
    starts, roster = recovering()
    start = next(iter(starts.calls().values()))
    for _ in range(3 * _DEAD_POLLS):
        starts._died(start, ActorUnavailableError("restarting", None))
    assert roster[0].state == "starting" and 0 in starts


def test_died_answers_give_the_worker_up_after_the_polls():
    starts, roster = recovering()
    start = next(iter(starts.calls().values()))
    for _ in range(_DEAD_POLLS - 1):
        starts._died(start, ActorDiedError())
    assert roster[0].state == "starting"
    starts._died(start, ActorDiedError())
    assert roster[0].state == "lost" and 0 not in starts
