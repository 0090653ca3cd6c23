"""Fixtures for the deployment checks: the repository's `deploy` package, rendered overlays."""

import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
if str(REPO_ROOT) not in sys.path:  # `deploy` is not an installed package; import it from the tree
    sys.path.insert(0, str(REPO_ROOT))

from deploy.checks.__main__ import overlay_dirs  # noqa: E402
from deploy.checks.kubernetes import schemas_root  # noqa: E402
from deploy.checks.render import render  # noqa: E402


@pytest.fixture(scope="session")
def schema_root() -> Path:
    """The CRD schemas: vendored deploy/schemas, or $TURNOPD_SCHEMAS_DIR (clear error when missing)."""
    return schemas_root()


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict[str, Any]]]:
    """Every overlay rendered once by kustomize: overlay name -> resources."""
    return {directory.name: render(directory) for directory in overlay_dirs()}
