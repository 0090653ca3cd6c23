"""Shared pieces of the rollout integration tests: the test zoo, a gateway config, pool settings."""

from pathlib import Path

from services.errors import ConflictError
from services.models.build import build_zoo
from services.models.registry import resolve_cache_dir
from services.settings import TurnOPDSettings, load_settings


def zoo_cache_dir() -> Path:
    """The tiny zoo (seed 0) in the tests' own corner of the cache (as tests/unit/rollout_worker builds it)."""
    cache = resolve_cache_dir() / "test-zoo"
    try:
        build_zoo(cache_dir=cache, seed=0)
    except ConflictError:
        build_zoo(cache_dir=cache, seed=0, force=True)
    return cache


def gateway_config(directory: Path) -> Path:
    """A config whose env gateway reuses the tests' generated games (one env worker)."""
    games = resolve_cache_dir() / "test-fixtures" / "envs"
    config = directory / "turnopd.toml"
    config.write_text(f'[env_gateway]\ncache_dir = "{games}"\nworkers = 1\nepisode_ttl_s = 300\n')
    return config


def rollout_settings(config: Path, zoo: Path, workers: int = 2) -> TurnOPDSettings:
    """Settings of a pool of ``workers`` on the test zoo; each worker takes one CPU."""
    return load_settings(
        config,
        {
            "models": {"cache_dir": zoo, "max_new_tokens": 32},
            "cluster": {"rollout_workers": workers},
            "rollout_worker": {"num_cpus": 1.0, "restart_timeout_s": 120.0},
        },
    )


def smoke_config(tmp_path: Path) -> Path:
    """configs/smoke.toml on the test caches (games, zoo), writing its run under tmp_path."""
    games = resolve_cache_dir() / "test-fixtures" / "envs"
    text = (Path(__file__).resolve().parents[1] / "configs" / "smoke.toml").read_text()
    text = text.replace("[env_gateway]\n", f'[env_gateway]\ncache_dir = "{games}"\n')
    text = text.replace("[models]\n", f'[models]\ncache_dir = "{zoo_cache_dir()}"\n')
    text = text.replace('run_dir = "runs/smoke"', f'run_dir = "{tmp_path / "run"}"')
    path = tmp_path / "smoke.toml"
    path.write_text(text)
    return path
