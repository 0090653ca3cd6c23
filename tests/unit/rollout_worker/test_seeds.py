import subprocess
import sys

from services.contracts.rollout import EpisodeTask
from services.rollout_worker.seeds import derive_seed, tasks_seed, turn_seed


def task(seed: int, sample: int = 0) -> EpisodeTask:
    return EpisodeTask(env="alfworld", split="train", seed=seed, task_type=None, sample_index=sample)


def test_seeds_are_63_bit_and_the_same_in_another_process():
    here = derive_seed("turn", 5, 2)
    code = "from services.rollout_worker.seeds import derive_seed; print(derive_seed('turn', 5, 2))"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert int(there) == here
    assert 0 <= here < 2**63


def test_request_seed_follows_the_tasks_in_order():
    assert tasks_seed([task(1), task(2)]) == tasks_seed([task(1), task(2)])
    assert tasks_seed([task(1), task(2)]) != tasks_seed([task(2), task(1)])
    assert tasks_seed([task(1, 0)]) != tasks_seed([task(1, 1)])
    assert len({turn_seed(3, t) for t in range(50)}) == 50
