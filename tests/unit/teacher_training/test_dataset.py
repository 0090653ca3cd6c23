"""The expert dataset cache: keyed by the request, written atomically, read back identically."""

from pathlib import Path

import pytest
from expert_episodes import scripted_episode

from services.contracts.expert_data import ExpertDatasetInfo
from services.errors import InputError
from services.teacher_training.dataset import (
    EPISODES_FILE,
    dataset_dir,
    dataset_key,
    load_dataset,
    save_dataset,
)


def info(
    seeds: list[int], episodes: int = 0, games: str = '{"generated": "v1-r8-d6-t2"}'
) -> ExpertDatasetInfo:
    return ExpertDatasetInfo(
        format=1,
        env="alfworld",
        split="train",
        seeds=seeds,
        games=games,
        max_expert_turns=60,
        episodes=episodes,
        dropped=len(seeds) - episodes,
    )


def test_key_depends_on_the_request_and_not_on_the_counts():
    assert dataset_key(info([0, 1])) == dataset_key(info([0, 1], episodes=2))
    assert dataset_key(info([0, 1])).startswith("alfworld-train-n2-")
    assert dataset_key(info([0, 1])) != dataset_key(info([1, 2]))
    assert dataset_key(info([0, 1])) != dataset_key(info([0, 1], games='{"generated": "v1-r9-d6-t2"}'))
    assert dataset_dir(info([0]), Path("/c")).parent == Path("/c/datasets/expert")


def test_save_then_load_round_trips_and_replaces(tmp_path: Path):
    directory = tmp_path / "ds"
    assert load_dataset(directory) is None
    episodes = [scripted_episode(seed=0), scripted_episode(seed=1)]
    save_dataset(directory, info([0, 1, 2], episodes=2), episodes)
    loaded = load_dataset(directory)
    assert loaded == (info([0, 1, 2], episodes=2), episodes)
    save_dataset(directory, info([0, 1, 2], episodes=1), episodes[:1])
    assert load_dataset(directory) == (info([0, 1, 2], episodes=1), episodes[:1])
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]  # no temporary directory left behind


def test_counts_must_match_the_episodes(tmp_path: Path):
    with pytest.raises(InputError, match="2 episodes"):
        save_dataset(tmp_path / "ds", info([0, 1], episodes=2), [scripted_episode()])
    save_dataset(tmp_path / "ds", info([0, 1], episodes=2), [scripted_episode(0), scripted_episode(1)])
    lines = (tmp_path / "ds" / EPISODES_FILE).read_text().splitlines()
    (tmp_path / "ds" / EPISODES_FILE).write_text(lines[0] + "\n")
    with pytest.raises(InputError, match="lists 2 episodes but holds 1"):
        load_dataset(tmp_path / "ds")
