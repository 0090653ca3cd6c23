"""Each service's own settings object, composed from a run's settings: what it holds, and that it
holds nothing else."""

from services.settings import load_settings


def test_the_controller_gets_the_method_the_run_length_h_max_depth_and_blend():
    run = load_settings(
        None,
        {
            "run": {"method": "blend"},
            "optim": {"steps": 40},
            "rollout": {"max_turns": 30},
            "depth": {"max": 30},
        },
    )
    own = run.for_controller()
    assert (own.method, own.steps, own.max_turns) == ("blend", 40, 30)
    assert own.depth == run.depth and own.blend == run.blend
    assert set(type(own).model_fields) == {"method", "steps", "max_turns", "depth", "blend"}


def test_a_rollout_worker_gets_its_sections_and_the_token_the_driver_resolved(monkeypatch):
    monkeypatch.delenv("TURNOPD_SERVICE_TOKEN", raising=False)
    run = load_settings(None, {"run": {"seed": 5}, "rollout": {"task_reminder": True}})
    own = run.for_rollout_worker()
    assert (own.seed, own.task_reminder, own.service_token) == (5, True, None)
    assert own.models == run.models and own.rollout_worker == run.rollout_worker
    monkeypatch.setenv("TURNOPD_SERVICE_TOKEN", "from-the-driver")
    token = load_settings(None).for_rollout_worker().service_token
    assert token is not None and token.get_secret_value() == "from-the-driver"
    configured = (
        load_settings(None, {"security": {"service_token": "set"}}).for_rollout_worker().service_token
    )
    assert configured is not None and configured.get_secret_value() == "set"
