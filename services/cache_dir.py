"""The cache root every part of TurnOPD shares (models, games, test fixtures), in one place:
``[models] cache_dir`` / ``[env_gateway] cache_dir`` where a config sets one, else
``$TURNOPD_CACHE_DIR``, else ``~/.cache/turnopd``. Read at call time, never at import."""

import os
from pathlib import Path

CACHE_ENV = "TURNOPD_CACHE_DIR"
DEFAULT_CACHE_DIR = Path("~/.cache/turnopd")


def resolve_cache_dir(configured: Path | None = None) -> Path:
    """The cache root: ``configured`` if given, else ``$TURNOPD_CACHE_DIR``, else ``~/.cache/turnopd``."""
    if configured is not None:
        return configured.expanduser()
    from_env = os.environ.get(CACHE_ENV)
    return Path(from_env).expanduser() if from_env else DEFAULT_CACHE_DIR.expanduser()
