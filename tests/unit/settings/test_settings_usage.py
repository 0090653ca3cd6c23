"""Every settings key acts: each field of every section (of a run config and of a teacher recipe)
is read somewhere outside the settings code.

"Read" means its name appears as an attribute (``.name``) or a string key (``"name"``) in the code
that uses the settings. A key accepted and never read would silently do nothing; one removed keeps
a clear error (``Section.REMOVED``, tested here too).
"""

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from services.errors import ConfigError
from services.settings import load_settings
from services.settings.algorithm import DepthSettings, DistillSettings
from services.settings.recipe import TeacherRecipeSettings
from services.settings.teacher import TeacherSettings
from services.settings.tree import TurnOPDSettings

SERVICES = Path(__file__).resolve().parents[3] / "services"

# Fields read only inside services/settings/ on purpose, with the reason.
READ_BY_THE_SETTINGS_THEMSELVES: dict[str, str] = {
    "cluster.teacher_replicas": "deploy/checks compares it with the manifests; the tree passes it to "
    "teacher.replicas, which the Serve deployment reads",
    "cluster.teacher_gpus_per_replica": "the same, with teacher.num_gpus",
    # Composed into a service's own settings object (services/settings/per_service.py), whose field
    # the service reads (checked below, test_composed_fields_are_read_by_their_service).
    "controller.redis_url": "read with its REDIS_URL fallback by ControllerSettings.resolved_redis_url(), "
    "which the Redis service calls",
    "cluster.learner_gpus_per_worker": "LearnerServiceSettings.gpus_per_worker",
    "cluster.rollout_gpus_per_worker": "RolloutWorkerServiceSettings.gpus",
    "cluster.pool_resources": "LearnerServiceSettings.pool_resource and RolloutWorkerServiceSettings.pool_resource",
}


def sections(model: type[BaseModel], prefix: str = "") -> list[tuple[str, type[BaseModel]]]:
    found = [(prefix, model)]
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += sections(annotation, f"{prefix}{name}.")
    return found


def is_settings_code(path: Path) -> bool:
    """services/settings/, an env's own settings module, and the sections' base class."""
    rel = path.relative_to(SERVICES)
    return rel.parts[0] == "settings" or rel.name in ("settings.py", "settings_section.py")


def code_outside_settings() -> str:
    return "\n".join(p.read_text() for p in SERVICES.rglob("*.py") if not is_settings_code(p))


def test_composed_fields_are_read_by_their_service():
    code = code_outside_settings()
    for field in ("gpus_per_worker", "gpus", "pool_resource", "resolved_redis_url"):
        assert re.search(rf"\.{field}\b", code), field


def test_every_settings_field_is_read_outside_the_settings_package():
    code = code_outside_settings()
    unread = []
    for prefix, model in sections(TurnOPDSettings) + sections(TeacherRecipeSettings):
        for name, field in model.model_fields.items():
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
                continue  # a section: its own fields are checked
            dotted = f"{prefix}{name}"
            if dotted in READ_BY_THE_SETTINGS_THEMSELVES:
                continue
            if not re.search(rf"\.{re.escape(name)}\b|[\"']{re.escape(name)}[\"']", code):
                unread.append(dotted)
    assert unread == [], f"settings accepted but never read: {unread}"


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("distill", "kl_coef", 0.1),
        ("distill", "kl_loss_coef", 0.0),
        ("distill", "loss_mode", '"topk_reverse_kl"'),
        ("depth", "adaptive", "false"),
        ("teacher", "client_timeout_s", "60.0"),
    ],
)
def test_a_removed_key_fails_with_its_reason(tmp_path, section, key, value):
    path = tmp_path / "cfg.toml"
    path.write_text(f"[{section}]\n{key} = {value}\n")
    with pytest.raises(ConfigError) as raised:
        load_settings(path)
    message = str(raised.value)
    assert f"{section}: '{key}' was removed" in message
    model = {"distill": DistillSettings, "depth": DepthSettings, "teacher": TeacherSettings}[section]
    assert model.REMOVED[key] in message


def settings_from(tmp_path, text: str) -> TurnOPDSettings:
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    return load_settings(path)


def test_the_teacher_pool_is_sized_once(tmp_path):
    from_cluster = settings_from(tmp_path, "[cluster]\nteacher_replicas = 3\nteacher_gpus_per_replica = 1\n")
    assert (from_cluster.teacher.replicas, from_cluster.teacher.num_gpus) == (3, 1.0)
    from_teacher = settings_from(tmp_path, "[teacher]\nreplicas = 2\nnum_gpus = 1.0\n")
    assert (from_teacher.cluster.teacher_replicas, from_teacher.cluster.teacher_gpus_per_replica) == (2, 1)
    both = settings_from(tmp_path, "[cluster]\nteacher_replicas = 2\n[teacher]\nreplicas = 2\n")
    assert both.teacher.replicas == both.cluster.teacher_replicas == 2
    with pytest.raises(
        ConfigError, match=r"cluster.teacher_replicas \(4\) and teacher.replicas \(1\) disagree"
    ):
        settings_from(tmp_path, "[cluster]\nteacher_replicas = 4\n[teacher]\nreplicas = 1\n")


def test_pool_resources_place_the_teacher_on_its_pool(tmp_path):
    assert settings_from(tmp_path, "[cluster]\npool_resources = true\n").teacher.resources == {
        "teacher_pool": 1.0
    }
    assert settings_from(tmp_path, "").teacher.resources == {}
    own = settings_from(tmp_path, "[cluster]\npool_resources = true\n[teacher]\nresources = {gpu_a100 = 1}\n")
    assert own.teacher.resources == {"gpu_a100": 1.0}
