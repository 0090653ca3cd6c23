"""Fixtures shared by unit and integration tests."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/tiny_models.py and friends


@pytest.fixture(scope="session")
def test_cache_dir() -> Path:
    """Where expensive test fixtures are built once and reused (TURNOPD_CACHE_DIR, default ~/.cache/turnopd)."""
    root = Path(os.environ.get("TURNOPD_CACHE_DIR", Path.home() / ".cache" / "turnopd")) / "test-fixtures"
    root.mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture(scope="session")
def tiny_student(test_cache_dir: Path) -> Path:
    from tiny_models import build_tiny_qwen3

    return build_tiny_qwen3(test_cache_dir / "tiny-student-v1", seed=1)


@pytest.fixture(scope="session")
def tiny_teacher(test_cache_dir: Path) -> Path:
    from tiny_models import build_tiny_qwen3

    return build_tiny_qwen3(test_cache_dir / "tiny-teacher-v1", seed=2, hidden=48)
