"""`turnopd status`'s controller row says when the controller rebuilt steps Redis had lost."""

from services.contracts.operations import ControllerHealth, RunStatus, ServiceStatus
from services.operations.service_probes import controller_detail


def test_the_controller_row_counts_the_steps_rebuilt_from_the_runs_records():
    health = ControllerHealth(step=5, h_bar=4.25, redis_ok=True, pid=42)
    assert controller_detail(health) == "pid 42, state at step 5, H_bar 4.25"
    rebuilt = health.model_copy(update={"rebuilt_steps": 2, "rebuilt": "Redis had lost ..."})
    assert controller_detail(rebuilt) == (
        "pid 42, state at step 5, H_bar 4.25, 2 step(s) Redis lost rebuilt from controller.jsonl"
    )


def status_of(rows: list[ServiceStatus]) -> RunStatus:
    """A live run's published status with these service rows."""
    return RunStatus(
        run_id="r",
        run_dir="/runs/r",
        method="turnopd",
        phase="training",
        step=1,
        total_steps=4,
        services=rows,
        updated_at=0.0,
    )


def test_status_asks_serve_about_teacher_apps_but_not_about_a_teacher_on_a_server(monkeypatch):
    from services.operations import service_probes

    asked: list[str] = []

    def probe_teacher(service: ServiceStatus) -> ServiceStatus:
        asked.append(service.name)
        return service.model_copy(update={"detail": "Serve RUNNING"})

    monkeypatch.setattr(service_probes, "probe_teacher", probe_teacher)
    rows = [
        ServiceStatus(name="teacher-teacher", health="ok", restarts=0, version="v", detail="Serve app"),
        ServiceStatus(
            name="teacher-search", health="ok", restarts=0, version="v", detail="endpoint http://vllm:8000"
        ),
    ]
    status = status_of(rows)
    probed = {s.name: s for s in service_probes.probe_services(status).services}
    assert asked == ["teacher-teacher"]  # no Serve app to find for the search source's server
    assert (
        probed["teacher-search"].health == "ok"
        and probed["teacher-search"].detail == "endpoint http://vllm:8000"
    )


def test_a_service_the_driver_is_restarting_stays_restarting_when_its_old_address_is_gone():
    from services.operations import service_probes

    def row(name: str, health: str, detail: str) -> ServiceStatus:
        return ServiceStatus(
            name=name, health=health, restarts=0, version="v", address="http://127.0.0.1:9", detail=detail
        )  # port 9 (discard): nothing listens, the ping is refused

    status = status_of([row("env-gateway", "restarting", "restart r1 in progress")])
    (probed,) = service_probes.probe_services(status, timeout_s=2.0).services
    assert probed.health == "restarting" and probed.detail == "restart r1 in progress; ping: ConnectError"
    gone = status.model_copy(update={"services": [row("env-gateway", "ok", "local process")]})
    (probed,) = service_probes.probe_services(gone, timeout_s=2.0).services
    assert probed.health == "down" and probed.detail == "ConnectError"  # not restarting: down
