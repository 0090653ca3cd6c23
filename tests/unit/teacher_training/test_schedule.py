"""The SFT step plan (seeded epochs, fractional passes) and the learning-rate schedule."""

import math
from collections import Counter
from itertools import pairwise

import pytest

from services.errors import InputError
from services.teacher_training.schedule import learning_rate, step_batches


def test_each_epoch_is_a_permutation_and_the_plan_is_seeded():
    plan = step_batches(10, epochs=2, batch_episodes=4, seed=3)
    flat = [i for batch in plan for i in batch]
    assert [len(b) for b in plan] == [4, 4, 4, 4, 4]
    assert sorted(flat[:10]) == list(range(10)) and sorted(flat[10:]) == list(range(10))
    assert plan == step_batches(10, epochs=2, batch_episodes=4, seed=3)
    assert plan != step_batches(10, epochs=2, batch_episodes=4, seed=4)


def test_fractional_epochs_take_a_share_of_the_next_pass():
    plan = step_batches(10, epochs=1.5, batch_episodes=4, seed=0)
    counts = Counter(i for batch in plan for i in batch)
    assert [len(b) for b in plan] == [4, 4, 4, 3]
    assert sum(counts.values()) == 15 and set(counts.values()) == {1, 2}
    assert step_batches(10, epochs=0.01, batch_episodes=4, seed=0) == [step_batches(10, 1, 1, 0)[0]]


def test_bad_plans_are_refused():
    with pytest.raises(InputError):
        step_batches(0, 1, 1, 0)
    with pytest.raises(InputError):
        step_batches(3, 0, 1, 0)


def test_warmup_then_cosine_from_peak_to_floor():
    lrs = [learning_rate(s, 10, 1.0, 2, "cosine", 0.1) for s in range(10)]
    assert lrs[:3] == [0.5, 1.0, 1.0]
    assert lrs[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in pairwise(lrs[1:]))
    # 9 decay steps after one warm-up step: the fifth sits halfway (cos = 0), the third a quarter in.
    assert learning_rate(5, 10, 1.0, 1, "cosine", 0.2) == pytest.approx(0.6)
    assert learning_rate(3, 10, 1.0, 1, "cosine", 0.0) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))


def test_linear_and_constant_schedules():
    assert [learning_rate(s, 5, 2.0, 0, "linear", 0.0) for s in range(5)] == [2.0, 1.5, 1.0, 0.5, 0.0]
    assert {learning_rate(s, 5, 2.0, 1, "constant", 0.0) for s in range(1, 5)} == {2.0}
    assert learning_rate(0, 1, 2.0, 0, "cosine", 0.5) == 2.0
    with pytest.raises(InputError):
        learning_rate(5, 5, 1.0, 0, "linear", 0.0)
