"""What the stack asks a local Ray for: every actor's logical CPUs, a teacher app per teacher."""

from contextlib import ExitStack
from pathlib import Path

import pytest

from services.operations import stack
from services.operations.stack import logical_cpus_needed
from services.run_dir import RunDir
from services.settings import load_settings


def test_a_local_cluster_is_sized_for_every_teacher_app():
    base = {
        "cluster": {"rollout_workers": 2},
        "rollout_worker": {"num_cpus": 0.5},
        "teacher": {"num_cpus": 0.25},
    }
    assert logical_cpus_needed(load_settings(None, base)) == 2 * 0.5 + 0.25 + 1.0  # learner: 1 CPU by default
    sources = [
        {"env": "alfworld", "share": 0.5, "teacher": "teacher-novel"},
        {"env": "search", "share": 0.25, "teacher": "teacher-search"},
        {"env": "webshop", "share": 0.25, "teacher": "teacher-novel"},  # shares the household teacher's app
    ]
    assert logical_cpus_needed(load_settings(None, {**base, "sources": sources})) == 2 * 0.5 + 2 * 0.25 + 1.0


def test_an_endpoint_teacher_reserves_no_cpus_here():
    settings = {"cluster": {"rollout_workers": 2}, "rollout_worker": {"num_cpus": 0.5}}
    endpoint = {"teacher": {"num_cpus": 0.25, "endpoint_url": "http://vllm:8000"}}
    assert logical_cpus_needed(load_settings(None, {**settings, **endpoint})) == 2 * 0.5 + 1.0


def test_a_source_on_its_own_endpoint_reserves_no_cpus_for_its_teacher():
    base = {
        "cluster": {"rollout_workers": 2},
        "rollout_worker": {"num_cpus": 0.5},
        "teacher": {"num_cpus": 0.25},
    }
    sources = [
        {"env": "alfworld", "share": 0.5, "teacher": "teacher-novel"},
        {"env": "search", "share": 0.5, "teacher": "teacher-search", "endpoint_url": "http://vllm:8000"},
    ]
    assert logical_cpus_needed(load_settings(None, {**base, "sources": sources})) == 2 * 0.5 + 0.25 + 1.0


class FakeService:
    """A service as start_stack drives it: start (perhaps failing), stop."""

    def __init__(self, kind: str, log: list[str], fails: bool = False) -> None:
        self.kind, self.log, self.fails = kind, log, fails

    def start(self) -> None:
        if self.fails:
            raise OSError(f"{self.kind}: port 8100 in use")
        self.log.append(f"{self.kind} up")

    def stop(self) -> None:
        self.log.append(f"{self.kind} stop")


def test_a_failed_start_up_stops_every_service_that_came_up(monkeypatch):
    log: list[str] = []
    redis, gateway, pool, learner = (FakeService(k, log) for k in ("redis", "env-gateway", "pool", "learner"))
    gateway.fails = True

    class FakeServices:
        def in_start_order(self):
            return [redis, gateway, pool, learner]

        def start_needs(self):
            return {gateway: [redis], pool: [gateway]}

    monkeypatch.setattr(stack, "connect_ray", lambda settings, exits: None)
    monkeypatch.setattr(stack.Services, "of", lambda ctx: FakeServices())
    with pytest.raises(OSError, match="env-gateway: port 8100 in use"), ExitStack() as exits:
        stack.start_stack(load_settings(None), RunDir(Path("unused")), exits)
    assert sorted(x for x in log if x.endswith(" up")) == ["learner up", "redis up"]  # the pool never started
    # every stop ran (a service that never started stops nothing), the learner's and Redis's among them
    assert sorted(x for x in log if x.endswith(" stop")) == [
        "env-gateway stop",
        "learner stop",
        "pool stop",
        "redis stop",
    ]
