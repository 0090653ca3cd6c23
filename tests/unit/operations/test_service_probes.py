"""`turnopd status`'s controller row says when the controller rebuilt steps Redis had lost."""

from services.contracts.operations import ControllerHealth
from services.operations.service_probes import controller_detail


def test_the_controller_row_counts_the_steps_rebuilt_from_the_runs_records():
    health = ControllerHealth(step=5, h_bar=4.25, redis_ok=True, pid=42)
    assert controller_detail(health) == "pid 42, state at step 5, H_bar 4.25"
    rebuilt = health.model_copy(update={"rebuilt_steps": 2, "rebuilt": "Redis had lost ..."})
    assert controller_detail(rebuilt) == (
        "pid 42, state at step 5, H_bar 4.25, 2 step(s) Redis lost rebuilt from controller.jsonl"
    )
