"""The rollout pool's operations as its owner applies them, and the roster other threads read, with no
Ray cluster: a roster of placeholder handles, so no message here makes a Ray call."""

from concurrent.futures import Future
from typing import Any

import pytest

from services.errors import InputError, TurnOPDError
from services.rollout_worker.pool_members import Member, Published, Roster
from services.rollout_worker.pool_messages import (
    Close,
    KeepWeights,
    PoolMessage,
    PublishWeights,
    ReplaceWorker,
    SwitchGateway,
)
from services.rollout_worker.pool_operations import PoolOperations
from services.rollout_worker.pool_stats import PoolStats
from services.settings import load_settings

OWN = load_settings(None).for_rollout_worker()


def operations(workers: int = 2) -> PoolOperations:
    roster = Roster([Member(f"handle-{i}", OWN, "incarnation") for i in range(workers)])
    return PoolOperations(roster, PoolStats(), OWN, "student", "http://127.0.0.1:1")


def apply(ops: PoolOperations, *messages: PoolMessage) -> list["Future[Any]"]:
    posted = [(message, Future[Any]()) for message in messages]
    ops.apply_inbox(posted)
    return [answer for _, answer in posted]


def test_a_roster_publishes_a_new_tuple_per_change_and_refuses_a_missing_member():
    roster = Roster([Member("a", OWN, None), Member("b", OWN, None)])
    seen = roster.view
    roster.set(1, Member("c", OWN, None, state="playing"))
    assert [m.handle for m in seen] == ["a", "b"]  # a reader's view does not change under it
    assert [(m.handle, m.state) for m in roster.view] == [("a", "idle"), ("c", "playing")]
    roster.append(Member("d", OWN, None))
    roster.truncate(1)
    assert [m.handle for m in roster] == ["a"] and len(roster) == 1
    with pytest.raises(IndexError, match="no member 1 in a roster of 1"):
        roster.set(1, Member("e", OWN, None))


def test_a_gateway_switch_counts_a_generation_and_is_answered_at_once():
    ops = operations()
    (first, second) = apply(ops, SwitchGateway("http://127.0.0.1:2"), SwitchGateway("http://127.0.0.1:3"))
    assert first.result(0) is None and second.result(0) is None
    assert (ops.gateway.url, ops.gateway.generation) == ("http://127.0.0.1:3", 2)
    assert not ops.busy(playing=False)


def test_a_publish_during_a_play_is_put_off_and_bad_weights_are_refused_when_applied():
    ops = operations()
    ops.playing = True
    (answer,) = apply(ops, PublishWeights("not weights", 1, False))
    assert not answer.done() and ops.published == Published(None, 0)
    assert not ops.busy(playing=True)  # the play may end: its put-off publish is the next owner's
    assert ops.busy(playing=False)
    ops.playing = False
    apply(ops)
    with pytest.raises(InputError, match="weights must be an ObjectRef or a state dict, got str"):
        answer.result(0)
    assert ops.published == Published(None, 0) and not ops.busy(playing=False)


def test_weights_kept_for_a_version_no_longer_published_are_dropped():
    ops = operations()
    ops.published = Published("ref-3", 3)
    old, current = apply(ops, KeepWeights("owned-2", 2), KeepWeights("owned-3", 3))
    assert old.result(0) is None and current.result(0) is None
    assert ops.published == Published("owned-3", 3)


def test_a_replacement_of_a_missing_worker_names_the_pool_s_workers():
    ops = operations(workers=2)
    (answer,) = apply(ops, ReplaceWorker(5, None))
    with pytest.raises(InputError, match=r"no rollout-worker-5: the pool has workers 0\.\.1"):
        answer.result(0)
    assert not ops.starts


def test_a_close_answers_the_messages_put_off_and_refuses_every_later_one():
    ops = operations(workers=0)
    ops.playing = True
    (put_off,) = apply(ops, PublishWeights("weights", 1, False))
    closed, after = apply(ops, Close(), SwitchGateway("http://127.0.0.1:4"))
    assert closed.result(0) is None and len(ops.roster) == 0
    with pytest.raises(TurnOPDError, match="the rollout pool closed"):
        put_off.result(0)
    with pytest.raises(TurnOPDError, match="the rollout pool is closed"):
        after.result(0)
    assert ops.gateway.generation == 0 and not ops.busy(playing=False)
