"""One play's chunk bookkeeping: attempts, replays, failures, deadlines, the wait for a new gateway."""

import time
from typing import cast

from services.contracts.rollout import EpisodeTask, RolloutRequest
from services.rollout_worker.chunk_ledger import ChunkLedger, InFlight
from services.rollout_worker.pool_members import Member, Roster
from services.settings.per_service import RolloutWorkerServiceSettings


def requests(n: int) -> list[RolloutRequest]:
    return [
        RolloutRequest(
            tasks=[EpisodeTask(env="alfworld", split="train", seed=i)],
            h_roll=2,
            temperature=1.0,
            weights_version=0,
        )
        for i in range(n)
    ]


def test_a_chunk_is_played_again_until_its_attempts_run_out_then_its_tasks_fail():
    ledger = ChunkLedger(requests(2), max_attempts=2, timeout_s=None)
    assert ledger.next_chunk() == 0 and ledger.next_chunk() == 1
    ledger.sent("ref-1", InFlight(1, 1, 0, "handle-1"))
    assert ledger.again(0, "rollout-worker-0", "died", "worker_lost")
    assert list(ledger.pending) == [0]  # first in line again
    assert ledger.next_chunk() == 0 and ledger.attempts == [2, 1]
    assert not ledger.again(0, "rollout-worker-1", "died\n  again", "worker_lost")
    [failure] = ledger.failed[0]
    assert failure.reason == "worker_lost" and failure.worker == "rollout-worker-1"
    assert failure.error == "played 2 times without a result; last error: died again"
    assert not ledger.finished()  # chunk 1 is still out; once it is back, nothing is left
    assert ledger.back("ref-1") == InFlight(1, 1, 0, "handle-1") and ledger.finished()


def test_an_overdue_chunk_is_reported_once():
    ledger = ChunkLedger(requests(1), max_attempts=3, timeout_s=0.0)
    ledger.sent("ref", InFlight(0, ledger.next_chunk(), 0, "handle"))
    assert ledger.overdue(time.monotonic() + 1) == [InFlight(0, 0, 0, "handle")]
    assert ledger.overdue(time.monotonic() + 1) == []
    assert ledger.back("ref") == InFlight(0, 0, 0, "handle") and ledger.finished()


def test_the_wait_for_a_new_gateway_is_once_per_silent_gateway():
    ledger = ChunkLedger(requests(2), max_attempts=3, timeout_s=None)
    ledger.wait_for_gateway(3, 60.0)
    generation, until = ledger.gateway_wait or (None, 0.0)
    assert generation == 3 and until > time.monotonic() + 59
    ledger.gateway_wait = None
    ledger.wait_for_gateway(3, 60.0)  # another chunk of the same silent gateway: the same deadline
    assert ledger.gateway_wait == (3, until)
    ledger.fail_pending("rollout-pool", "no rollout worker is left")
    assert sorted(ledger.failed) == [0, 1] and not ledger.pending


def test_a_roster_view_read_before_a_change_stays_as_it_was():
    own = cast(RolloutWorkerServiceSettings, "settings")  # the roster never reads them
    roster = Roster([Member("a", own, None), Member("b", own, None)])
    before = roster.view
    roster.set(1, Member("b", own, "x", state="lost"))
    roster.append(Member("c", own, None, state="starting"))
    assert [m.live for m in before] == [True, True]
    assert [(m.handle, m.live) for m in roster.view] == [("a", True), ("b", False), ("c", True)]
    roster.truncate(1)
    assert [m.handle for m in roster.view] == ["a"] and len(before) == 2
