"""The restart boundary: a failed restart becomes a result for the operator, never a stopped run.

A fake pool stands in for the Ray actors (this tests the glue; the real thing runs in
tests/integration/test_chaos.py).
"""

import asyncio
import dataclasses
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from services.contracts.operations import RestartRequest
from services.errors import ConflictError, InputError
from services.operations.learner_ops import LearnerLostError, ResumeMismatchError
from services.operations.managed_service import RunContext
from services.operations.restarts import ServiceRestarts
from services.operations.run_pieces import RunPieces
from services.operations.run_services import Services
from services.rollout_worker.pool import PoolStats
from services.run_dir import RunDir
from services.settings import TurnOPDSettings
from services.settings.per_service import RolloutWorkerServiceSettings
from services.teacher_scorer.http_client import TeacherHttpError


class FakePool:
    size = 2
    weights_version = 7

    def __init__(self, fail_with: BaseException | None = None) -> None:
        self.fail_with = fail_with
        self.replaced: list[tuple[int, object]] = []
        self.live_workers = ["rollout-worker-0", "rollout-worker-1"]
        self.stats = PoolStats()

    def worker_settings(self, index: int) -> RolloutWorkerServiceSettings:
        return TurnOPDSettings().for_rollout_worker()

    def members(self) -> list[tuple[int, RolloutWorkerServiceSettings, bool]]:
        return [
            (i, self.worker_settings(i), f"rollout-worker-{i}" in self.live_workers) for i in range(self.size)
        ]

    def replace_worker(self, index: int, settings: object = None) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.replaced.append((index, settings))

    def retune(self, settings: RolloutWorkerServiceSettings) -> None:
        self.own = settings

    def resize(self, size: int, settings: RolloutWorkerServiceSettings) -> int:
        if self.fail_with is not None:
            raise self.fail_with
        before, self.size = self.size, size
        return before


def services_with(pool: FakePool) -> Services:
    """The run's services, not started: a fake pool, an external gateway and Redis."""
    ctx = RunContext(pieces=RunPieces.of(TurnOPDSettings()), run=RunDir(Path("unused")), run_id="r")
    services = Services.of(ctx)
    services.pool.pool = pool  # type: ignore[assignment]
    services.env_gateway.url = "http://x"
    services.redis.url = "redis://localhost:6379/0"
    return services


def restarts_with(pool: FakePool) -> ServiceRestarts:
    return ServiceRestarts(services_with(pool))


def test_a_worker_restart_is_counted_and_reported():
    pool = FakePool()
    restarts = restarts_with(pool)
    result = restarts.run(RestartRequest(request_id="a", service="rollout-pool"), step=3)
    # no --config: each worker comes back with the settings it had
    assert (
        result.ok
        and result.step == 3
        and pool.replaced == [(0, pool.worker_settings(0)), (1, pool.worker_settings(1))]
    )
    assert result.message == (
        "rollout-worker-0 replaced at weights version 7; rollout-worker-1 replaced at weights version 7"
    )
    assert restarts.counts["rollout-worker-1"] == 1 and restarts.history == [result]


def test_a_worker_restart_with_a_config_takes_only_what_the_worker_may_change(tmp_path):
    config = tmp_path / "new.toml"
    config.write_text('[models]\nstudent = "other"\nmax_new_tokens = 17\n[optim]\nsteps = 3\n')
    pool = FakePool()
    request = RestartRequest(request_id="w", service="rollout-worker-1", config_path=str(config))
    assert restarts_with(pool).run(request, step=2).ok
    [(index, settings)] = pool.replaced
    assert index == 1 and settings.models.max_new_tokens == 17 and settings.models.student == "student"


def test_a_controller_restart_refuses_a_config_naming_why(tmp_path):
    config = tmp_path / "new.toml"
    config.write_text("[depth]\nmin = 3\n")
    request = RestartRequest(request_id="k", service="controller", config_path=str(config))
    result = restarts_with(FakePool()).run(request, step=2)
    assert not result.ok and result.message == (
        "InputError: controller takes nothing from a new config: every setting it has defines the run; "
        "restart it without --config"
    )


@pytest.mark.parametrize("error", [InputError("no rollout-worker-9"), IndexError("list index out of range")])
def test_a_failed_restart_is_a_result_not_a_crash(error):
    restarts = restarts_with(FakePool(fail_with=error))
    result = restarts.run(RestartRequest(request_id="b", service="rollout-worker-1"), step=4)
    assert not result.ok and result.message == f"{type(error).__name__}: {error}"
    assert restarts.counts["rollout-worker-1"] == 0


def test_services_this_run_does_not_own_are_refused():
    restarts = restarts_with(FakePool())
    for service, why in (("env-gateway", "was not started by this run"), ("redis", "Redis is external")):
        result = restarts.run(RestartRequest(request_id=service, service=service), step=1)
        assert not result.ok and why in result.message


def test_a_broken_resume_stops_the_run():
    restarts = restarts_with(FakePool(fail_with=ResumeMismatchError("resumed at 3, not 4")))
    with pytest.raises(ResumeMismatchError):
        restarts.run(RestartRequest(request_id="c", service="rollout-worker-0"), step=4)


def test_a_scale_request_resizes_the_pool_and_counts_no_restart():
    pool = FakePool()
    restarts = restarts_with(pool)
    result = restarts.run(RestartRequest(request_id="s", service="rollout-pool", replicas=3), step=2)
    assert result.ok and result.message == "rollout pool 2 -> 3 workers at weights version 7"
    assert pool.size == 3 and pool.replaced == [] and sum(restarts.counts.values()) == 0


def test_a_refused_scale_is_a_result_naming_why():
    short = InputError("1 more rollout worker(s) need CPU 1 each; the cluster is short of CPU 1 more")
    result = restarts_with(FakePool(fail_with=short)).run(
        RestartRequest(request_id="t", service="rollout-pool", replicas=3), step=2
    )
    assert not result.ok and result.message == f"InputError: {short}"


def test_an_autoscaling_teacher_is_not_scaled_by_hand():
    restarts = restarts_with(FakePool())
    restarts.services["teacher"].settings = TurnOPDSettings.model_validate(
        {"teacher": {"autoscaling": True}}
    ).for_teacher()
    result = restarts.run(RestartRequest(request_id="u", service="teacher", replicas=2), step=1)
    assert not result.ok and "the teacher autoscales between 1 and" in result.message


def test_status_lists_every_service_once_in_order_with_its_restarts():
    pool = FakePool()
    pool.live_workers = ["rollout-worker-0"]  # type: ignore[attr-defined]
    pool.stats = SimpleNamespace(replacements_by_worker=[0, 0], crashes_by_worker=[0, 2])  # type: ignore[attr-defined]
    services = services_with(pool)
    services.learner.handle = SimpleNamespace(alive=True, world=1, solo=True)  # type: ignore[assignment]
    services.redis.url = "redis://:pw@10.0.0.5:6379/0"
    restarts = ServiceRestarts(services)
    restarts.run(RestartRequest(request_id="c", service="rollout-worker-0"), step=2)
    rows = {row.name: row for row in restarts.status(step=2)}
    assert list(rows) == [
        "controller",
        "rollout-worker-0",
        "rollout-worker-1",
        "teacher",
        "env-gateway",
        "learner",
        "redis",
    ]
    assert (rows["rollout-worker-1"].health, rows["rollout-worker-1"].restarts) == ("down", 2)  # crashes seen
    assert restarts.counts["rollout-worker-0"] == 1  # the operator's restart, counted by name
    assert rows["redis"].address == "redis://***@10.0.0.5:6379/0" and rows["redis"].version == "external"
    assert rows["env-gateway"].detail == "external" and rows["learner"].version.startswith("step 2, config ")
    assert rows["learner"].detail == "one actor, without Ray Train"
    services.learner.handle = SimpleNamespace(alive=True, world=2, solo=False)  # type: ignore[assignment]
    assert {row.name: row for row in restarts.status(step=2)}["learner"].detail == "Ray Train, 2 worker(s)"


def test_only_pools_scale():
    with pytest.raises(ConflictError, match="controller has no replicas to scale"):
        restarts_with(FakePool()).services["controller"].scale(2)


def test_services_start_after_what_they_need_and_an_unstarted_one_stops_safely():
    services = Services.of(
        RunContext(pieces=RunPieces.of(TurnOPDSettings()), run=RunDir(Path("unused")), run_id="r")
    )
    kinds = [service.kind for service in services.in_start_order()]
    assert kinds == ["redis", "controller", "env-gateway", "teacher", "rollout-worker", "learner"]
    needs = {s.kind: [n.kind for n in ns] for s, ns in services.start_needs().items()}
    # the rest at once (the gateway after Redis: both pick a free port as they start)
    assert needs == {"controller": ["redis"], "env-gateway": ["redis"], "rollout-worker": ["env-gateway"]}
    for service in reversed(services.in_start_order()):
        service.stop()  # a start-up that failed early stops the services it never reached


def test_the_pool_follows_a_gateway_switch():
    pool = FakePool()
    switched: list[str] = []
    pool.switch_env_gateway = switched.append  # type: ignore[attr-defined]
    services = services_with(pool)
    for follow in services.env_gateway._followers:
        follow("http://127.0.0.1:9")
    assert switched == ["http://127.0.0.1:9"]


class FakeTrainer:
    """A learner as the handle sees it: steps to resume at, a checkpoint, a close."""

    def __init__(self, resumed_step: int) -> None:
        self.resumed_step, self.world, self.alive, self.solo = resumed_step, 1, True, True

    def checkpoint(self, step: int) -> None:
        pass

    def close(self) -> None:
        self.alive = False


def learner_ops_starting(*outcomes: BaseException | None):
    """The run's learner service (a fake trainer at step 4), whose next starts give ``outcomes`` in turn:
    an error to raise, or None for a trainer that resumes at step 4."""
    from services.operations.learner_handle import LearnerHandle

    services = services_with(FakePool())
    ops = services.learner
    ops.handle = LearnerHandle(FakeTrainer(4))  # type: ignore[arg-type]
    left = list(outcomes)

    def start(settings: object) -> FakeTrainer:
        outcome = left.pop(0)
        if outcome is not None:
            raise outcome
        return FakeTrainer(4)

    ops._learner = start  # type: ignore[method-assign,assignment]
    return services, ops


def test_a_learner_that_fails_to_restart_is_started_again_with_the_old_settings():
    """Issue 38: the old trainer is closed before the new one starts; a failed start without a config
    used to leave the handle on the closed trainer, and the next step died."""
    services, ops = learner_ops_starting(RuntimeError("no resources for the trainer"), None)
    result = ServiceRestarts(services).run(RestartRequest(request_id="l", service="learner"), step=4)
    assert not result.ok and result.message == "RuntimeError: no resources for the trainer"
    assert ops.handle is not None and ops.handle.alive and ops.handle.resumed_step == 4


def test_a_learner_that_cannot_be_started_at_all_stops_the_run():
    services, ops = learner_ops_starting(RuntimeError("first"), RuntimeError("second"))
    with pytest.raises(LearnerLostError, match=r"no learner could be started .*second.*stops at step 4"):
        ServiceRestarts(services).run(RestartRequest(request_id="m", service="learner"), step=4)
    assert ops.handle is not None and not ops.handle.alive


@pytest.mark.parametrize("replicas", [None, 2], ids=["restart", "scale"])
def test_an_endpoint_teacher_is_neither_restarted_nor_scaled_by_the_run(replicas):
    restarts = restarts_with(FakePool())
    restarts.services["teacher"].settings = TurnOPDSettings.model_validate(
        {"teacher": {"endpoint_url": "http://vllm:8000"}}
    ).for_teacher()
    result = restarts.run(RestartRequest(request_id="e", service="teacher", replicas=replicas), step=1)
    verb = "restart" if replicas is None else "scale"
    assert (
        not result.ok
        and f"the teacher is the endpoint http://vllm:8000, outside the run: {verb} it there"
        in (result.message)
    )


def test_an_endpoint_teacher_is_probed_before_step_1_and_deploys_nothing(zoo_cache: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    teacher = restarts_with(FakePool()).services["teacher"]
    settings = TurnOPDSettings.model_validate(
        {
            "teacher": {"endpoint_url": f"http://127.0.0.1:{port}", "client_max_attempts": 1},
            "models": {"cache_dir": str(zoo_cache)},  # the check reads the student's tokenizer first
        }
    )
    teacher.settings = settings.for_teacher()
    teacher.ctx = dataclasses.replace(teacher.ctx, pieces=RunPieces.of(settings))
    teacher.start()
    with pytest.raises(TeacherHttpError, match=r"failed 1 times, last with ConnectError.*--resume"):
        asyncio.run(teacher.preflight())
    assert not teacher.deployed


def test_the_rows_of_a_restart_in_progress_say_restarting_and_only_while_it_runs():
    pool = FakePool()
    restarts = restarts_with(pool)
    # the rows the fakes can give: the pool's workers and the (external) gateway
    restarts.services = {k: v for k, v in restarts.services.items() if k in ("rollout-worker", "env-gateway")}
    seen: list[dict[str, str]] = []

    def replace_worker(index: int, settings: object = None) -> None:  # `turnopd status` read mid-restart
        seen.append({row.name: row.health for row in restarts.status(3)})

    pool.replace_worker = replace_worker  # type: ignore[method-assign]
    result = restarts.run(RestartRequest(request_id="w1", service="rollout-worker-1"), step=3)
    assert result.ok and len(seen) == 1
    during = seen[0]
    assert during["rollout-worker-1"] == "restarting" and during["rollout-worker-0"] != "restarting"
    assert all(health != "restarting" for name, health in during.items() if name != "rollout-worker-1")
    rows = {row.name: row for row in restarts.status(3)}
    assert rows["rollout-worker-1"].health != "restarting"  # over: the row is the service's own again
    seen.clear()
    restarts.run(RestartRequest(request_id="all", service="rollout-pool"), step=3)
    assert [d["rollout-worker-0"] == d["rollout-worker-1"] == "restarting" for d in seen] == [True, True]
