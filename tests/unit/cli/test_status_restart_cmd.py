"""`turnopd status` rendering and `turnopd restart` argument checks (no cluster needed)."""

from comparison_logs import source_part
from rich.console import Console

from services.cli.status_view import status_renderable, summary_lines
from services.contracts.operations import RestartResult, RunStatus, ServiceStatus
from services.contracts.orchestrator import EvalRecord, PoolLoad
from services.operations.redis_ops import masked_url

STATUS = RunStatus(
    run_id="r1",
    run_dir="/runs/r1",
    method="turnopd",
    phase="training",
    step=3,
    total_steps=8,
    h_hat=4,
    h_bar=3.25,
    alpha=0.375,
    weights_version=3,
    last_step_s=4.5,
    services=[
        ServiceStatus(name="teacher", health="ok", restarts=1, version="config 0a1b2c3d"),
        ServiceStatus(name="rollout-worker-1", health="down", restarts=2, version="weights 3", detail="dead"),
    ],
    restarts=[
        RestartResult(
            request_id="x",
            service="teacher",
            ok=True,
            message="redeployed",
            started_at=0.0,
            seconds=7.0,
            step=2,
        )
    ],
    updated_at=100.0,
)


def test_summary_names_step_depth_alpha_and_eval():
    lines = summary_lines(STATUS, now=112.0)
    assert lines[0] == "run r1 (turnopd) in /runs/r1"
    assert lines[1] == "training: step 3/8, weights version 3, last step 4.5 s, updated 12 s ago"
    assert lines[2] == "H_hat 4, H_bar 3.25, alpha 0.375"
    assert lines[3] == "pools busy in the last step: not recorded yet"
    assert lines[4] == "last eval: none yet"
    load = PoolLoad(wall_s=4.5, busy={"rollout": 0.5, "teacher": 0.25, "learner": 0.4}, overlap=0.15)
    busy = STATUS.model_copy(update={"pool_load": load, "weights_lag": 1})
    assert summary_lines(busy, now=112.0)[3] == (
        "pools busy in the last step: rollout 50%, teacher 25%, learner 40%; two or more at once 15%; "
        "weights lag 1"
    )


def test_a_multi_environment_run_shows_each_sources_controller_and_last_eval():
    evals = [
        EvalRecord(step=2, cumulative_s=9.0, split="valid_unseen", episodes=4, n=1, success_rate=0.25,
                   avg_at_n=0.25, per_task_type={}, env="alfworld"),
    ]  # fmt: skip
    multi = STATUS.model_copy(
        update={
            "sources": [source_part("alfworld", 12, 0.25), source_part("search", 4, 0.5)],
            "source_evals": evals,
        }
    )
    lines = summary_lines(multi, now=112.0)
    assert lines[2] == "2 task sources, each with its own controller (below)"
    assert lines[5:] == [
        "  alfworld: H_hat 12, H_bar 11.50, alpha 0.250, success 0.50 on 4 trajectories; "
        "eval after step 2: Avg@1 0.250, success 0.250 on valid_unseen",
        "  search: H_hat 4, H_bar 3.50, alpha 0.500, success 0.50 on 4 trajectories; no eval yet",
    ]


def test_tables_list_every_service_and_restart():
    console = Console(width=160, record=True)
    console.print(status_renderable(STATUS, now=112.0))
    text = console.export_text()
    assert "rollout-worker-1" in text and "down" in text and "config 0a1b2c3d" in text
    assert "recent restarts" in text and "redeployed" in text


def test_restart_refuses_unknown_service_without_a_cluster(cli):
    result = cli("restart", "database")
    assert result.code == 2
    assert result.err.startswith("error: unknown service 'database'; one of: rollout-worker-{i}")


def test_masked_redis_url():
    assert masked_url("redis://:s3cret@127.0.0.1:6379/0") == "redis://***@127.0.0.1:6379/0"
    assert masked_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


def test_status_without_a_cluster_is_one_line(monkeypatch):
    """Run as its own process: the test session may hold a Ray of its own (integration tests)."""
    import subprocess
    import sys

    from services.loopback import free_loopback_port

    address = f"127.0.0.1:{free_loopback_port()}"
    monkeypatch.setenv("RAY_ADDRESS", address)
    # The three run side by side: each spends most of its time starting Python and waiting on Ray.
    commands = [("status",), ("status", "--json"), ("restart", "teacher")]
    running = [
        subprocess.Popen(
            [sys.executable, "-m", "services.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in commands
    ]
    for args, process in zip(commands, running, strict=True):
        stdout, stderr = process.communicate(timeout=120)
        assert (process.returncode, stdout) == (2, ""), (args, stderr)
        assert stderr.startswith(f"error: no Ray cluster answers at {address} (RAY_ADDRESS)"), (args, stderr)
        assert len(stderr.strip().splitlines()) == 1, (args, stderr)
