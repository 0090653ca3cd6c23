"""Issue 33: `turnopd restart controller` while the pipeline is inside controller calls.

The old actor is held inside a call (``__ray_call__`` waiting on a gate file), so the pipeline's
``ingest`` and, as at staleness 1, the next ``plan`` are in flight when the operator's restart kills
it; the restart (``ControllerOps.replace``, what `turnopd restart controller` runs in the driver)
and the pipeline's threads then race to learn of the successor. Before the fix the pipeline could
install a handle it had looked up by name, dropping the creator's, and Ray collected the new actor
at the next garbage collection ("all references to the actor were removed").
"""

import gc
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import ray
from controller_inputs import small_run_settings, stats_for

from services.controller.replay import replay
from services.operations.controller_ops import ControllerOps
from services.operations.managed_service import Change, RunContext
from services.operations.redis_ops import RedisOps
from services.operations.run_pieces import RunPieces
from services.run_dir import RunDir

pytestmark = pytest.mark.integration
LAG = 1
# the actor runs ``hold_until``: send it by value (this test module is not importable there)
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def hold_until(actor_self: Any, gate: str) -> None:
    """Run on the controller actor: keep it busy (its next calls queue) until ``gate`` exists."""
    while not Path(gate).exists():
        time.sleep(0.01)


def in_thread(fn, *args) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["value"] = fn(*args)
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, out


def test_a_controller_replaced_under_in_flight_calls_keeps_serving(ray_session, tmp_path):
    settings = small_run_settings(steps=11)  # 2, then 3 rounds of 2, then 3 more
    run = RunDir(tmp_path / "run")
    run.create(settings)
    ctx = RunContext(pieces=RunPieces.of(settings), run=run, run_id="race")
    counts: Counter[str] = Counter()
    redis = RedisOps(ctx, counts)
    redis.start()
    ops = ControllerOps(ctx, counts, redis)
    ops.start()
    client = ops.client
    assert client is not None
    try:
        step = 0

        def complete(k: int) -> None:
            plan = client.plan(k, LAG)
            client.ingest(k, stats_for(k) if plan.probe else None, LAG)

        for k in (1, 2):
            complete(k)
        step = 2
        for round_ in range(3):
            gate = tmp_path / f"gate-{round_}"
            old = client.handle
            k = step + 1
            planned = client.plan(k, LAG)
            blocker = old.__ray_call__.remote(hold_until, str(gate))
            # the pipeline at staleness 1: ingest of step k and plan of step k+1, both held in the actor
            ingesting, ingest_out = in_thread(client.ingest, k, stats_for(k) if planned.probe else None, LAG)
            planning, plan_out = in_thread(client.plan, k + 1, LAG)
            time.sleep(0.5)  # both calls are queued behind the blocker
            ready, _ = ray.wait([blocker], timeout=0)
            assert not ready, ray.get(blocker)  # the blocker holds the actor
            assert ingesting.is_alive() and planning.is_alive(), (ingest_out, plan_out)
            restarting, restart_out = in_thread(ops.replace, Change(), k - 1)
            restarting.join(timeout=120)
            assert "value" in restart_out, restart_out.get("error")
            ingesting.join(timeout=120)
            planning.join(timeout=120)
            assert "value" in ingest_out and "value" in plan_out, (ingest_out, plan_out)
            with pytest.raises(ray.exceptions.RayActorError):
                ray.get(blocker)
            assert ingest_out["value"].step == k and plan_out["value"].step == k + 1
            gc.collect()  # a replacement held only through a looked-up handle would be collected now
            time.sleep(1.0)
            again = client.plan(k + 1, LAG)  # pure: the same plan as the one made in flight
            assert again == plan_out["value"]
            client.ingest(k + 1, stats_for(k + 1) if again.probe else None, LAG)
            step = k + 1
        for k in range(step + 1, step + 4):  # at least 3 more steps on the last replacement
            gc.collect()
            complete(k)
        assert counts["controller"] == 3
        decisions = ray.get(client.handle.decisions.remote())
        probes = ray.get(client.handle.probes.remote())
        assert [d.step for d in decisions] == list(range(1, settings.optim.steps + 1))
        expected = list(replay(probes, settings.optim.steps, settings.for_controller().depth, LAG))
        assert [(d.h_bar, d.h_hat, d.planned_from) for d in decisions] == [
            (d.h_bar, d.h_hat, d.planned_from) for d in expected
        ]
    finally:
        ops.stop()
        redis.stop()
