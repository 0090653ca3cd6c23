"""Shared pieces of the rollout integration tests: the test zoo, a gateway config, pool settings, and
an engine that replays rendered expert episodes."""

import functools
import re
from collections.abc import Sequence
from pathlib import Path

from scripted_engines import ScriptedEngine

from services.cache_dir import resolve_cache_dir
from services.envs.game_cache import file_lock
from services.errors import ConflictError
from services.models.build import build_zoo
from services.rollout_worker.engines import Generation, GenerationParams
from services.settings import TurnOPDSettings, load_settings
from services.teacher_training.rendering import RenderedEpisode


@functools.cache
def zoo_cache_dir() -> Path:
    """The tiny zoo (seed 0) in the tests' own corner of the cache, built once and reused (rebuilt
    when an older version of the zoo code built it: a ConflictError). Checked once per process: the
    check reads the whole corpus (0.6 CPU-seconds a call)."""
    cache = resolve_cache_dir() / "test-zoo"
    with file_lock(cache.with_name("test-zoo.lock")):  # two xdist workers may want it at once
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


def rollout_settings(config: Path, zoo: Path, workers: int = 2, cpus: float = 1.0) -> TurnOPDSettings:
    """Settings of a pool of ``workers`` on the test zoo; each worker reserves ``cpus`` logical CPUs."""
    return load_settings(
        config,
        {
            "models": {"cache_dir": zoo, "max_new_tokens": 32},
            "cluster": {"rollout_workers": workers},
            "rollout_worker": {"num_cpus": cpus, "restart_timeout_s": 120.0},
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


def short_run(steps: int, cluster: str, rollout_worker: str = "", checkpoint_every: int = 100) -> str:
    """Overrides of configs/smoke.toml for a run of ``steps`` batches of 4, each actor a quarter of
    a logical CPU, no evaluation before the end; ``cluster`` and ``rollout_worker``: extra lines."""
    return f"""
[optim]
batch = 4
steps = {steps}
lr = 1e-4

[eval]
interval = 100
episodes = 2
val_n = 1
at_start = false

[cluster]
{cluster}

[rollout_worker]
num_cpus = 0.25
{rollout_worker}

[teacher]
num_cpus = 0.25

[learner]
checkpoint_every = {checkpoint_every}
num_cpus_per_worker = 0.25
"""


def override_sections(text: str, overrides: str) -> str:
    """TOML ``text`` with every ``[section]`` that ``overrides`` has removed, then ``overrides`` appended."""
    for section in re.findall(r"^\[[^\]]+\]$", overrides, flags=re.MULTILINE):
        if f"\n{section}\n" not in f"\n{text}":
            continue
        start = f"\n{text}".index(f"\n{section}\n")
        end = text.find("\n[", start + 1)
        text = text[:start] + text[end + 1 :] if end != -1 else text[:start]
    return text.rstrip("\n") + "\n" + overrides


class ReplayEngine(ScriptedEngine):
    """Answers a prompt that is a rendered episode's prefix with that episode's next response ids:
    the agent loop driven by it must show exactly the text teacher training renders."""

    def __init__(self, episodes: Sequence[RenderedEpisode], end_of_turn: int) -> None:
        super().__init__(end_of_turn)
        self._answers: dict[tuple[int, ...], list[int]] = {
            tuple(e.token_ids[:start]): e.token_ids[start:end]
            for e in episodes
            for start, end in e.response_spans
        }

    def generate(self, prompts: Sequence[Sequence[int]], params: GenerationParams) -> list[Generation]:
        answers = [self._answers[tuple(p)] for p in prompts]  # KeyError: the loop showed other text
        return [Generation(a, [0.0] * len(a), "stop") for a in answers]
