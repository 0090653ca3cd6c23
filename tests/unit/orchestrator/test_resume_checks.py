"""A resume never erases a run silently: no start over at step 0 once a checkpoint covered a logged step."""

import pytest
from checkpoint_fixtures import write_checkpoint

from services.errors import InputError
from services.learner.checkpoint import complete_checkpoints
from services.orchestrator.resume_checks import (
    check_before_drop,
    check_resumed,
    check_stop_after,
    first_checkpoint_step,
)


def test_the_first_checkpoint_is_at_checkpoint_every_or_the_last_step():
    assert first_checkpoint_step(checkpoint_every=10, steps=32) == 10
    assert first_checkpoint_step(checkpoint_every=10, steps=4) == 4


def test_only_a_checkpoint_above_the_logs_is_refused_and_nothing_is_deleted(tmp_path):
    # keep_checkpoints = 1 before the driver pruned: step 4 saved (and step 3's pruned), step 4 not logged
    write_checkpoint(tmp_path, 4)
    with pytest.raises(InputError) as refused:
        check_before_drop(tmp_path, last_logged=3, first_checkpoint=1)
    assert str(refused.value) == (
        f"cannot resume {tmp_path}: its logs reach step 3, but {tmp_path / 'checkpoints'} holds no intact "
        "checkpoint of step 3 or before (it holds: step_000004); resuming would start over at step 0 and "
        "erase the logs of steps 1..3. Nothing was changed"
    )
    assert [p.name for p in complete_checkpoints(tmp_path)] == ["step_000004"]


def test_a_damaged_checkpoint_at_or_below_the_logs_does_not_count(tmp_path):
    (write_checkpoint(tmp_path, 2) / "rng.pt").unlink()
    with pytest.raises(
        InputError, match=r"holds no intact checkpoint of step 3 or before \(it holds: step_000002\)"
    ):
        check_before_drop(tmp_path, last_logged=3, first_checkpoint=2)
    write_checkpoint(tmp_path, 1)
    check_before_drop(tmp_path, last_logged=3, first_checkpoint=1)


def test_steps_no_checkpoint_held_yet_may_be_trained_again(tmp_path):
    check_before_drop(tmp_path, last_logged=0, first_checkpoint=1)  # a fresh run
    # checkpoint_every = 2, step 1 logged; step 2's checkpoint saved but not logged: it goes, step 1 again
    write_checkpoint(tmp_path, 2)
    check_before_drop(tmp_path, last_logged=1, first_checkpoint=2)
    check_resumed(tmp_path, resumed=0, last_logged=1, first_checkpoint=2)


def test_a_learner_that_loaded_no_checkpoint_is_refused_once_the_logs_reach_one(tmp_path):
    with pytest.raises(InputError, match=r"no checkpoint in .* of step 5 or before loads .* steps 1\.\.5"):
        check_resumed(tmp_path, resumed=0, last_logged=5, first_checkpoint=2)
    check_resumed(tmp_path, resumed=4, last_logged=5, first_checkpoint=2)


def test_a_sitting_may_stop_only_after_a_checkpoint_step_still_to_train():
    check_stop_after(4, 0, checkpoint_every=4, steps=32)
    check_stop_after(30, 28, checkpoint_every=4, steps=30)  # the last step is checkpointed too
    with pytest.raises(InputError, match=r"checkpoints every 4 steps .* after 4 again; stop after 4, 8"):
        check_stop_after(6, 0, checkpoint_every=4, steps=32)
    with pytest.raises(InputError, match=r"stop after 8$"):
        check_stop_after(6, 4, checkpoint_every=4, steps=32)  # step 4 is logged: 8 is the next
    with pytest.raises(InputError, match=r"the run's steps are 1\.\.32"):
        check_stop_after(33, 0, checkpoint_every=4, steps=32)
    with pytest.raises(InputError, match="has already logged step 8"):
        check_stop_after(8, 8, checkpoint_every=4, steps=32)
