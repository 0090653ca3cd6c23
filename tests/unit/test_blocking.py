"""Blocking calls from the driver's loop (``blocking``, ``OffLoop``): results, errors, and a cancelled
caller's call that ``drain`` still waits for."""

import asyncio
import threading
import time

import pytest

from services.blocking import OffLoop, blocking


def test_a_blocking_call_runs_on_another_thread_and_gives_its_result_or_error():
    loop_thread = threading.get_ident()

    async def both():
        where = await blocking(threading.get_ident)
        with pytest.raises(ZeroDivisionError):
            await blocking(lambda: 1 / 0)
        return where, await blocking(lambda a, b=0: a + b, 2, b=3)

    where, value = asyncio.run(both())
    assert where != loop_thread and value == 5


def test_the_loop_keeps_running_while_a_call_blocks():
    ticks = []

    async def tick_while_blocked():
        async def ticker():
            while True:
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        await blocking(time.sleep, 0.3)
        task.cancel()

    asyncio.run(tick_while_blocked())
    assert len(ticks) >= 5  # the ticker ran during the 0.3 s sleep


def test_drain_waits_for_a_call_whose_caller_was_cancelled():
    release, ended = threading.Event(), []

    def play():
        release.wait(timeout=30)
        ended.append(True)
        raise RuntimeError("the abandoned play failed")  # dropped: its caller is gone

    async def cancel_then_drain():
        calls = OffLoop()
        caller = asyncio.create_task(calls.call(play))
        await asyncio.sleep(0.05)
        caller.cancel()
        await asyncio.gather(caller, return_exceptions=True)
        assert caller.cancelled() and not ended  # the call itself runs on
        threading.Timer(0.1, release.set).start()
        await asyncio.wait_for(calls.drain(), 30)
        return ended

    assert asyncio.run(cancel_then_drain()) == [True]
