"""The expert dataset cache: ``<cache>/datasets/expert/<key>/`` holds ``episodes.jsonl`` and ``info.json``.

The key hashes everything that fixes the episodes (layout version, env, split, the seeds, what
fixes the gateway's games, the turn limit), so a different request never reads a stale file, and
the same request (e.g. `turnopd teacher train` run again with the same seed and size) skips the
collection. Files are written to a temporary directory and renamed into place.
"""

import hashlib
from pathlib import Path

from services.atomic_directory import atomic_directory
from services.cache_dir import resolve_cache_dir
from services.contracts.expert_data import ExpertDatasetInfo, ExpertEpisode
from services.contracts.jsonl import read_jsonl
from services.errors import InputError

DATASET_FORMAT = 1
EPISODES_FILE = "episodes.jsonl"
INFO_FILE = "info.json"


def dataset_key(info: ExpertDatasetInfo) -> str:
    """A short name for the request ``info`` describes (its counts excluded: they are results)."""
    request = info.model_dump_json(exclude={"episodes", "dropped"})
    digest = hashlib.sha256(request.encode()).hexdigest()[:16]
    return f"{info.env}-{info.split}-n{len(info.seeds)}-{digest}"


def dataset_dir(info: ExpertDatasetInfo, cache_dir: Path | None = None) -> Path:
    return resolve_cache_dir(cache_dir) / "datasets" / "expert" / dataset_key(info)


def load_dataset(directory: Path) -> tuple[ExpertDatasetInfo, list[ExpertEpisode]] | None:
    """The cached dataset in ``directory``, or None when there is none."""
    info_path = directory / INFO_FILE
    if not info_path.is_file():
        return None
    info = ExpertDatasetInfo.model_validate_json(info_path.read_text())
    episodes = read_jsonl(directory / EPISODES_FILE, ExpertEpisode)
    if len(episodes) != info.episodes:
        raise InputError(f"{directory} lists {info.episodes} episodes but holds {len(episodes)}; delete it")
    return info, episodes


def save_dataset(directory: Path, info: ExpertDatasetInfo, episodes: list[ExpertEpisode]) -> None:
    """Write the dataset atomically (a sibling temp dir renamed into place)."""
    if info.episodes != len(episodes):
        raise InputError(f"info says {info.episodes} episodes, got {len(episodes)}")
    with atomic_directory(directory) as tmp:
        with (tmp / EPISODES_FILE).open("w", encoding="utf-8") as sink:
            for episode in episodes:
                sink.write(episode.model_dump_json() + "\n")
        (tmp / INFO_FILE).write_text(info.model_dump_json(indent=2) + "\n")
