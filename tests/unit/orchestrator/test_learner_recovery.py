"""When the run restarts a lost learner (``learner_recovery``): which failures are a lost learner, how
many recoveries it allows, and how the recovery is described."""

from types import SimpleNamespace

from ray.exceptions import ActorDiedError

from services.learner.service import LearnerError
from services.orchestrator.learner_recovery import LearnerRecovery, _played_again, learner_lost


def chained(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


def test_a_lost_learner_is_a_trainer_that_is_down_or_an_actor_that_died_under_the_update():
    stopped = chained(LearnerError("learner workers stopped"), ActorDiedError())
    assert learner_lost(stopped, alive=True)  # the solo worker or the mailbox died under the call
    assert learner_lost(LearnerError("no answer from the learner in 1800 s"), alive=False)
    # a learner that is up and refused the batch would refuse it again: not a loss
    assert not learner_lost(LearnerError("unexpected learner message during step 3"), alive=True)


def recovery(max_restarts, alive=False):
    stack = SimpleNamespace(learner=SimpleNamespace(alive=alive))
    return LearnerRecovery(max_restarts, 2, stack, None, None, None)  # type: ignore[arg-type]


def test_the_run_recovers_up_to_max_restarts_times_and_never_a_learner_that_is_up():
    lost = chained(LearnerError("learner workers stopped"), ActorDiedError())
    assert recovery(3).may_recover(lost)
    spent = recovery(2)
    spent.used = 2
    assert not spent.may_recover(lost)
    assert not recovery(0).may_recover(lost)
    assert not recovery(3, alive=True).may_recover(LearnerError("unexpected learner message"))


def test_the_recovery_says_which_steps_are_played_again():
    assert _played_again(2, 5) == "; steps 3..5 are played again"
    assert _played_again(2, 3) == "; step 3 is played again"
    assert _played_again(4, 4) == ""
