"""Operations contracts (`turnopd status` / `turnopd restart`): JSON round trips and name checks."""

import pytest
from pydantic import ValidationError

from services.contracts.operations import (
    ControllerHealth,
    RestartRequest,
    RestartResult,
    RunStatus,
    ServiceStatus,
    WorkerHealth,
    check_service_name,
)
from services.contracts.orchestrator import EvalRecord

RESULT = RestartResult(
    request_id="abc", service="teacher", ok=True, message="redeployed", started_at=1.0, seconds=2.5, step=3
)
STATUS = RunStatus(
    run_id="r1",
    run_dir="/runs/r1",
    method="turnopd",
    phase="training",
    step=3,
    total_steps=8,
    h_hat=4,
    h_bar=3.2,
    alpha=0.375,
    weights_version=3,
    last_step_s=4.5,
    last_eval=EvalRecord(
        step=2,
        cumulative_s=9.0,
        split="valid",
        episodes=4,
        n=1,
        success_rate=0.5,
        avg_at_n=0.5,
        per_task_type={},
    ),
    services=[
        ServiceStatus(
            name="env-gateway", health="ok", restarts=1, version="config 0a1b2c3d", address="http://x"
        )
    ],
    restarts=[RESULT],
    updated_at=100.0,
)
EXAMPLES = [
    RestartRequest(request_id="abc", service="rollout-worker-12", config_path="/tmp/new.toml"),
    RESULT,
    STATUS,
    WorkerHealth(name="rollout-worker-0", pid=42, weights_version=3, playing=True),
    ControllerHealth(
        step=3,
        h_bar=3.2,
        redis_ok=False,
        redis_error="ConnectionError",
        pid=7,
        rebuilt_steps=2,
        rebuilt="Redis had lost the controller's steps 2..3 (it held step 1)",
    ),
]


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_json_round_trip(message):
    again = type(message).model_validate_json(message.model_dump_json())
    assert again == message


@pytest.mark.parametrize(
    "name", ["rollout-worker-0", "rollout-worker-7", "rollout-pool", "teacher", "env-gateway", "controller",
             "learner", "redis"],
)  # fmt: skip
def test_restartable_names(name):
    assert check_service_name(name) == name
    assert RestartRequest(request_id="x", service=name).service == name


@pytest.mark.parametrize("name", ["rollout-worker-", "rollout-worker-01", "worker-1", "Teacher", "learner "])
def test_unknown_service_names_are_refused(name):
    with pytest.raises(ValueError, match="unknown service"):
        check_service_name(name)
    with pytest.raises(ValidationError, match="unknown service"):
        RestartRequest(request_id="x", service=name)


def test_status_rejects_unknown_health_and_fields():
    with pytest.raises(ValidationError):
        ServiceStatus(name="teacher", health="fine", restarts=0, version="")
    with pytest.raises(ValidationError):
        RunStatus.model_validate({**STATUS.model_dump(), "extra": 1})


def test_a_scale_request_names_a_pool_and_takes_no_config():
    assert RestartRequest(request_id="a", service="teacher", replicas=2).replicas == 2
    with pytest.raises(
        ValidationError,
        match="only the pools rollout, teacher \\(teacher-<name> in a multi-teacher run\\) can be scaled, not 'learner'",
    ):
        RestartRequest(request_id="a", service="learner", replicas=2)
    with pytest.raises(ValidationError, match="a scale request takes no config"):
        RestartRequest(request_id="a", service="rollout-pool", replicas=2, config_path="x.toml")
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        RestartRequest(request_id="a", service="rollout-pool", replicas=0)


def test_a_multi_teacher_runs_teacher_apps_scale_by_name():
    from services.contracts.operations import scale_service

    assert scale_service("teacher-search", 2) == "teacher-search"
    assert RestartRequest(request_id="s", service="teacher-search", replicas=2).replicas == 2
    with pytest.raises(ValueError, match="unknown pool 'search'"):
        scale_service("search", 2)
