"""The learner's mailbox: per-rank inboxes and one outbox, FIFO, a wait that runs out is an answer."""

import asyncio

import pytest

from services.learner.mailbox import Mailbox


def run(coro):
    return asyncio.run(coro)


def test_each_box_is_its_own_fifo():
    async def scenario():
        box = Mailbox(2)
        for rank, message in [(0, "a0"), (1, "b0"), (0, "a1"), (None, "out0"), (None, "out1")]:
            await box.put(rank, message)
        assert await box.sizes() == [2, 1, 2]
        got = [await box.get(0, 1.0), await box.get(0, 1.0), await box.get(1, 1.0)]
        got += [await box.get(None, 1.0), await box.get(None, 1.0)]
        assert await box.sizes() == [0, 0, 0]
        return got

    assert run(scenario()) == [["a0"], ["a1"], ["b0"], ["out0"], ["out1"]]


def test_a_wait_that_runs_out_is_an_empty_answer_and_a_late_message_still_arrives():
    async def scenario():
        box = Mailbox(1)
        empty = await box.get(0, 0.05)
        waiting = asyncio.create_task(box.get(None, None))  # no timeout: waits for the message
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await box.put(None, {"step": 3})
        return empty, await waiting

    assert run(scenario()) == ([], [{"step": 3}])


def test_a_rank_outside_the_learner_and_an_empty_world_are_refused():
    with pytest.raises(ValueError, match="at least one rank, got world=0"):
        Mailbox(0)

    async def scenario():
        box = Mailbox(2)
        with pytest.raises(ValueError, match="no inbox for rank 2: the learner has 2 ranks"):
            await box.put(2, "x")
        with pytest.raises(ValueError, match="no inbox for rank -1"):
            await box.get(-1, 0.0)

    run(scenario())
