"""A checkpoint's recorded observation format, and the refusal to play it in another one."""

import json
from pathlib import Path

import pytest

from services.errors import ConflictError
from services.models.build import MANIFEST
from services.models.trained_format import check_task_reminder, trained_task_reminder


def checkpoint(root: Path, name: str, manifest: dict | None) -> Path:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "config.json").write_text("{}")
    if manifest is not None:
        (directory / MANIFEST).write_text(json.dumps(manifest))
    return directory


def test_the_manifest_says_whether_the_model_learned_with_task_reminders(tmp_path: Path):
    assert trained_task_reminder(checkpoint(tmp_path, "remind", {"task_reminder": True})) is True
    assert trained_task_reminder(checkpoint(tmp_path, "plain", {"task_reminder": False})) is False
    assert trained_task_reminder(checkpoint(tmp_path, "older", {"kind": "model"})) is None
    assert trained_task_reminder(checkpoint(tmp_path, "real", None)) is None  # e.g. a hub checkpoint


def test_a_model_is_refused_in_the_other_format_with_the_key_to_set(tmp_path: Path):
    remind = checkpoint(tmp_path, "remind", {"task_reminder": True})
    check_task_reminder(str(remind), None, True)
    with pytest.raises(ConflictError, match=r"task_reminder = true in the config's \[rollout\]") as error:
        check_task_reminder(str(remind), None, False)
    assert "TURNOPD_ROLLOUT__TASK_REMINDER=true" in str(error.value)
    plain = checkpoint(tmp_path, "plain", {"task_reminder": False})
    with pytest.raises(ConflictError, match=r"trained with rollout\.task_reminder = false"):
        check_task_reminder(str(plain), None, True)
    for unknown in ("older", "real"):  # models that record nothing play in either format
        directory = checkpoint(tmp_path, unknown, {} if unknown == "older" else None)
        check_task_reminder(str(directory), None, True)
        check_task_reminder(str(directory), None, False)


def test_a_joint_model_records_its_format_per_env_and_is_checked_on_each(tmp_path: Path):
    joint = checkpoint(tmp_path, "joint", {"task_reminder": {"alfworld": True, "search": False}})
    assert trained_task_reminder(joint, "alfworld") is True
    assert trained_task_reminder(joint, "search") is False
    assert trained_task_reminder(joint, "webshop") is None  # never learned there: either format
    assert trained_task_reminder(joint) is None
    check_task_reminder(str(joint), None, True, env="alfworld")
    check_task_reminder(str(joint), None, False, env="search")
    check_task_reminder(str(joint), None, True, env="webshop")
    with pytest.raises(
        ConflictError,
        match=r"trained with rollout\.task_reminder = false on search, but these settings have true; "
        r".*in the \[\[sources\]\] entry of search",
    ):
        check_task_reminder(str(joint), None, True, env="search")
    # a model of one env keeps one setting, whatever env it plays
    remind = checkpoint(tmp_path, "remind", {"task_reminder": True})
    assert trained_task_reminder(remind, "webshop") is True
