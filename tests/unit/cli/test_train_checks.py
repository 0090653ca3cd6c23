"""`turnopd train`'s checks before anything starts: the checkpoints it can read here."""

import json
import shutil
from pathlib import Path

import pytest

from services.cli.train_cmd import _check_formats
from services.errors import ConflictError, NotFoundError
from services.models.build import MANIFEST
from services.settings import load_settings

HOUSEHOLD = {"env": "alfworld", "share": 0.5, "teacher": "teacher"}
REMOTE = {"env": "search", "share": 0.5, "teacher": "teacher-on-a-server-only"}


def test_a_source_scored_on_a_server_needs_no_checkpoint_here(zoo_cache):
    models = {"cache_dir": str(zoo_cache), "student": "student"}
    on_server = {**REMOTE, "endpoint_url": "http://vllm-search:8000"}
    _check_formats(load_settings(None, {"models": models, "sources": [HOUSEHOLD, on_server]}))
    with pytest.raises(NotFoundError, match="teacher-on-a-server-only"):  # an app needs its checkpoint
        _check_formats(load_settings(None, {"models": models, "sources": [HOUSEHOLD, REMOTE]}))


def test_a_joint_student_is_checked_in_each_source_s_format(zoo_cache: Path, tmp_path: Path):
    student = tmp_path / "student-joint"
    shutil.copytree(zoo_cache / "models" / "student", student)
    manifest = json.loads((student / MANIFEST).read_text())
    (student / MANIFEST).write_text(
        json.dumps({**manifest, "task_reminder": {"alfworld": True, "search": False}})
    )
    models = {"cache_dir": str(zoo_cache), "student": str(student)}
    household = {**HOUSEHOLD, "task_reminder": True}
    search = {"env": "search", "share": 0.5, "teacher": "teacher", "task_reminder": False}
    _check_formats(load_settings(None, {"models": models, "sources": [household, search]}))
    with pytest.raises(ConflictError, match=r"task_reminder = false on search, but these settings have true"):
        _check_formats(
            load_settings(None, {"models": models, "sources": [household, {**search, "task_reminder": True}]})
        )
