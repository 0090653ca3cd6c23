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
    assert set(type(own).model_fields) == {"method", "steps", "max_turns", "depth", "blend", "env"}
    assert own.env is None and run.for_controllers().controllers == (own,)


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


def test_a_learner_rank_gets_the_loss_the_optimizer_its_section_and_where_it_runs():
    run = load_settings(
        None,
        {
            "run": {"seed": 3, "run_id": "r1"},
            "distill": {"clip_ratio": [0.8, 5.0]},
            "cluster": {"learner_gpus_per_worker": 1},
        },
    )
    own = run.for_learner()
    assert (own.seed, own.run_id, own.on_gpu) == (3, "r1", True)
    assert own.distill.clip_ratio == (0.8, 5.0) and own.optim == run.optim and own.learner == run.learner
    assert load_settings(None).for_learner().on_gpu is False
