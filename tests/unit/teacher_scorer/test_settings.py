"""The [teacher] settings section and the Serve options derived from it."""

import pytest

from services.errors import ConfigError
from services.ray_names import TEACHER_DEPLOYMENT as DEPLOYMENT_NAME
from services.settings import load_settings
from services.settings.teacher import TeacherSettings
from services.teacher_scorer.placement import deployment_options


def test_defaults_and_env_override(monkeypatch):
    s = load_settings()
    assert (s.teacher.engine, s.teacher.device, s.teacher.host) == ("transformers", "cpu", "127.0.0.1")
    monkeypatch.setenv("TURNOPD_TEACHER__REPLICAS", "3")
    assert load_settings().teacher.replicas == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[teacher]\nengine = 'onnx'\n", "teacher.engine: Input should be 'transformers' or 'vllm'"),
        (
            "[teacher]\ntoken_budget = 4096\nmax_batch_tokens = 1024\n",
            "max_batch_tokens (1024) must be >= token_budget",
        ),
        (
            "[teacher]\nautoscaling = true\nmin_replicas = 5\nmax_replicas = 2\n",
            "min_replicas (5) must be <= max_replicas",
        ),
        ("[teacher]\nroute_prefix = 'teacher'\n", "teacher.route_prefix"),
    ],
)
def test_invalid_teacher_settings_name_the_key(tmp_path, text, message):
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert message in str(info.value)


def test_fixed_replicas_options():
    options = deployment_options(TeacherSettings(replicas=2, num_cpus=0.5, resources={"teacher_pool": 1}))
    assert options["name"] == DEPLOYMENT_NAME
    assert options["num_replicas"] == 2 and "autoscaling_config" not in options
    assert options["ray_actor_options"] == {
        "num_cpus": 0.5,
        "num_gpus": 0.0,
        "resources": {"teacher_pool": 1},
    }
    assert options["max_ongoing_requests"] == 128
    assert options["max_surge_percent"] == 100  # a redeploy keeps the old replicas until new ones are up
    assert deployment_options(TeacherSettings(restart_surge_percent=0))["max_surge_percent"] == 0


def test_autoscaling_options():
    options = deployment_options(
        TeacherSettings(
            autoscaling=True, min_replicas=1, max_replicas=6, target_ongoing_requests=8, num_gpus=1
        )
    )
    assert "num_replicas" not in options
    assert options["autoscaling_config"] == {
        "min_replicas": 1,
        "max_replicas": 6,
        "target_ongoing_requests": 8.0,
    }
    assert options["ray_actor_options"] == {"num_cpus": 1.0, "num_gpus": 1.0}
