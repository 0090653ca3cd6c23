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


# --- scheduling over pytest-xdist workers (scripts/test.sh: `pytest -n auto --dist loadgroup`) ---

# The modules whose tests are whole training runs (each run starts every service: CPU-bound on two
# cores). Under xdist they form one group, played in turn by one worker, while the other worker
# takes everything else, test by test: two such runs at once would each take twice as long.
RUN_MODULES = frozenset(
    {
        "test_multi_node.py",
        "test_chaos.py",
        "test_train_smoke.py",
        "test_compare_smoke.py",
        "test_multi_env.py",
        "test_scale.py",
        "test_process_deaths.py",
    }
)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto``: ``TURNOPD_TEST_WORKERS``, else 2, but none for the unit tier alone
    (``-m "not integration"``: one process is faster there, each worker collecting everything again)."""
    if (wanted := os.environ.get("TURNOPD_TEST_WORKERS")) is not None:
        return int(wanted)
    return 0 if "not integration" in (config.option.markexpr or "") else 2


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the training-run modules (``RUN_MODULES``) in one xdist group, first in the list."""
    if not hasattr(config, "workerinput"):
        return
    runs = [i for i in items if i.path.name in RUN_MODULES]
    for item in runs:
        item.add_marker(pytest.mark.xdist_group("training-runs"))
    chosen = set(map(id, runs))
    items[:] = runs + [i for i in items if id(i) not in chosen]
