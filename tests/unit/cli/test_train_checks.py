"""`turnopd train`'s checks before anything starts: the checkpoints it can read here."""

import pytest

from services.cli.train_cmd import _check_formats
from services.errors import NotFoundError
from services.settings import load_settings

HOUSEHOLD = {"env": "alfworld", "share": 0.5, "teacher": "teacher"}
REMOTE = {"env": "search", "share": 0.5, "teacher": "teacher-on-a-server-only"}


def test_a_source_scored_on_a_server_needs_no_checkpoint_here(zoo_cache):
    models = {"cache_dir": str(zoo_cache), "student": "student"}
    on_server = {**REMOTE, "endpoint_url": "http://vllm-search:8000"}
    _check_formats(load_settings(None, {"models": models, "sources": [HOUSEHOLD, on_server]}))
    with pytest.raises(NotFoundError, match="teacher-on-a-server-only"):  # an app needs its checkpoint
        _check_formats(load_settings(None, {"models": models, "sources": [HOUSEHOLD, REMOTE]}))
