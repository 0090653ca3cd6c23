"""Each service's own settings object: what it is given, and what a restart with a new config changes."""

import pytest

from services.settings import load_settings
from services.settings.per_service import (
    ControllerServiceSettings,
    ControllersSettings,
    EnvGatewayServiceSettings,
    LearnerServiceSettings,
    RedisServiceSettings,
    RolloutWorkerServiceSettings,
    TeacherServiceSettings,
)


@pytest.fixture
def run():
    return load_settings(
        None, {"optim": {"steps": 20}, "models": {"student": "run-student", "max_new_tokens": 32}}
    )


@pytest.fixture
def new():
    return load_settings(
        None,
        {
            "optim": {"steps": 99, "lr": 0.5},
            "run": {"seed": 5},
            "distill": {"distill_topk": 7},
            "models": {"student": "other", "teacher": "other-teacher", "max_new_tokens": 64},
            "rollout_worker": {"max_attempts": 7},
            "teacher": {"model": "/models/teacher-v2", "max_batch_size": 8},
            "learner": {"token_budget": 1024},
            "env_gateway": {"workers": 5},
            "controller": {"redis_url": "redis://elsewhere:6379/0", "redis_start_timeout_s": 3.0},
        },
    )


def test_a_rollout_worker_takes_its_sections_but_keeps_the_run_and_the_student(run, new):
    merged = run.for_rollout_worker().restarted(new.for_rollout_worker())
    assert merged.models.max_new_tokens == 64 and merged.rollout_worker.max_attempts == 7
    assert merged.models.student == "run-student" and merged.models.teacher == run.models.teacher
    assert merged.seed == run.run.seed  # the run's seed, not the new file's 5


def test_the_teacher_can_be_upgraded_but_keeps_the_runs_top_k(run, new):
    merged = run.for_teacher().restarted(new.for_teacher())
    assert merged.teacher.model == "/models/teacher-v2" and merged.teacher.max_batch_size == 8
    assert merged.top_k == run.distill.distill_topk != 7
    assert merged.default_model == run.models.teacher  # an unset [teacher] model: still the run's
    moved = new.for_teacher().teacher.model_copy(update={"endpoint_url": "http://vllm:8000"})
    kept = run.for_teacher().teacher.restarted(moved)
    assert kept.endpoint_url == "" and kept.model == "/models/teacher-v2"  # where it scores stays


def test_the_learner_takes_learner_but_not_the_loss_or_optimizer(run, new):
    merged = run.for_learner().restarted(new.for_learner())
    assert merged.learner.token_budget == 1024
    assert merged.optim == run.optim and merged.distill == run.distill and merged.seed == run.run.seed


def test_redis_keeps_its_url_and_takes_its_start_timeout(run, new):
    merged = run.for_redis().restarted(new.for_redis())
    assert merged.controller.redis_start_timeout_s == 3.0
    assert merged.controller.redis_url == run.controller.redis_url  # same Redis, same state


def test_the_env_gateway_takes_its_whole_section(run, new):
    assert run.for_env_gateway().restarted(new.for_env_gateway()).env_gateway == new.env_gateway


def test_the_controller_has_nothing_a_restart_may_change(run, new):
    assert ControllerServiceSettings.RESTARTABLE == ()
    assert run.for_controller().restarted(new.for_controller()) == run.for_controller()


def test_every_restartable_section_is_a_field_of_its_type():
    for kind in (
        ControllersSettings,
        ControllerServiceSettings,
        RolloutWorkerServiceSettings,
        LearnerServiceSettings,
        TeacherServiceSettings,
        EnvGatewayServiceSettings,
        RedisServiceSettings,
    ):
        assert set(kind.RESTARTABLE) <= set(kind.model_fields), kind.__name__


def test_the_fingerprint_follows_the_services_own_settings_only(run, new):
    teacher = run.for_teacher()
    assert len(teacher.fingerprint()) == 8
    assert teacher.fingerprint() != teacher.restarted(new.for_teacher()).fingerprint()
    other_learner = run.model_copy(update={"learner": new.learner})
    assert other_learner.for_teacher().fingerprint() == teacher.fingerprint()


def test_the_fingerprint_masks_the_service_token(monkeypatch, run):
    monkeypatch.setenv("TURNOPD_SERVICE_TOKEN", "s3cret-token")
    worker = load_settings(None).for_rollout_worker()
    assert worker.service_token is not None and "s3cret" not in worker.model_dump_json()


def test_the_learner_and_workers_get_their_cluster_resources():
    settings = load_settings(
        None,
        {
            "cluster": {
                "learner_workers": 2,
                "learner_gpus_per_worker": 1,
                "rollout_gpus_per_worker": 1,
                "pool_resources": True,
            }
        },
    )
    learner = settings.for_learner()
    assert (learner.workers, learner.gpus_per_worker, learner.on_gpu, learner.pool_resource) == (
        2,
        1,
        True,
        True,
    )
    worker = settings.for_rollout_worker()
    assert (worker.gpus, worker.pool_resource) == (1.0, True)
    assert not load_settings(None).for_learner().on_gpu


def test_the_ready_wait_fits_the_engine_unless_set():
    transformers = load_settings(None).for_rollout_worker()
    vllm = load_settings(None, {"models": {"engine": "vllm"}}).for_rollout_worker()
    assert (transformers.ready_timeout_s, vllm.ready_timeout_s) == (300.0, 900.0)
    chosen = load_settings(None, {"models": {"engine": "vllm"}, "rollout_worker": {"ready_timeout_s": 42}})
    assert chosen.for_rollout_worker().ready_timeout_s == 42.0
    assert (transformers.restart_timeout_s, vllm.restart_timeout_s) == (300.0, 900.0)
