"""What a restarted service takes from a new config, and its config hash."""

import pytest

from services.errors import InputError
from services.operations.restart_settings import (
    config_hash,
    restart_settings,
    service_kind,
    start_or_restore,
    worker_index,
)
from services.settings import load_settings


@pytest.fixture
def run_settings():
    return load_settings(
        None, {"optim": {"steps": 20}, "models": {"student": "run-student", "max_new_tokens": 32}}
    )


def new_settings():
    return load_settings(
        None,
        {
            "optim": {"steps": 99, "lr": 0.5},
            "models": {"student": "other", "max_new_tokens": 64},
            "rollout_worker": {"max_attempts": 7},
            "teacher": {"model": "/models/teacher-v2", "max_batch_size": 8},
            "learner": {"token_budget": 1024},
            "controller": {"redis_url": "redis://elsewhere:6379/0", "redis_start_timeout_s": 3.0},
        },
    )


def test_service_kinds_and_worker_index():
    assert service_kind("rollout-worker-3") == "rollout-worker" and worker_index("rollout-worker-3") == 3
    assert service_kind("rollout-pool") == "rollout-worker" and worker_index("rollout-pool") is None
    assert service_kind("teacher") == "teacher" and worker_index("teacher") is None
    with pytest.raises(InputError):
        service_kind("database")


def test_rollout_worker_takes_its_sections_but_keeps_the_run_and_the_student(run_settings):
    merged = restart_settings(run_settings, new_settings(), "rollout-worker-0")
    assert merged.models.max_new_tokens == 64 and merged.rollout_worker.max_attempts == 7
    assert merged.models.student == "run-student"  # the model being trained never changes
    assert merged.optim == run_settings.optim and merged.teacher == run_settings.teacher


def test_teacher_can_be_upgraded_learner_and_controller_keep_the_run(run_settings):
    new = new_settings()
    teacher = restart_settings(run_settings, new, "teacher")
    assert teacher.teacher.model == "/models/teacher-v2" and teacher.teacher.max_batch_size == 8
    assert teacher.models == run_settings.models and teacher.distill == run_settings.distill
    learner = restart_settings(run_settings, new, "learner")
    assert learner.learner.token_budget == 1024 and learner.optim.lr == run_settings.optim.lr
    controller = restart_settings(run_settings, new, "controller")
    assert controller.controller.redis_start_timeout_s == 3.0
    assert controller.controller.redis_url == run_settings.controller.redis_url  # same Redis, same state
    assert restart_settings(run_settings, new, "redis") == run_settings


def test_config_hash_follows_the_service_sections_only(run_settings):
    new = new_settings()
    assert len(config_hash(run_settings, "teacher")) == 8
    assert config_hash(run_settings, "teacher") != config_hash(new, "teacher")
    same_teacher = restart_settings(run_settings, new, "learner")
    assert config_hash(same_teacher, "teacher") == config_hash(run_settings, "teacher")
    assert config_hash(run_settings, "rollout-worker-0") == config_hash(run_settings, "rollout-pool")


def test_a_failed_start_with_new_settings_brings_the_old_ones_back_and_reraises():
    old = load_settings(None)
    new = old.model_copy(update={"run": old.run.model_copy(update={"seed": 7})})
    started: list[int] = []

    def start(settings):  # type: ignore[no-untyped-def]
        started.append(settings.run.seed)
        if settings.run.seed == 7:
            raise RuntimeError("the new process did not come up")

    with pytest.raises(RuntimeError, match="did not come up"):
        start_or_restore(start, new, old)
    assert started == [7, old.run.seed]  # tried the new settings, then started again as it was

    started.clear()
    assert start_or_restore(start, None, old) is old and started == [old.run.seed]


def test_a_failed_plain_restart_is_not_retried():
    old = load_settings(None)
    calls: list[object] = []

    def start(settings):  # type: ignore[no-untyped-def]
        calls.append(settings)
        raise OSError("no resources")

    with pytest.raises(OSError):
        start_or_restore(start, None, old)
    assert calls == [old]  # no settings to fall back to: one attempt, the failure reported
