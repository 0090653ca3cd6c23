"""The learner handle the pipeline holds: valid across a replacement of the trainer behind it."""

from services.operations.learner_handle import LearnerHandle


class FakeLearner:
    def __init__(self, name: str, events: list[str], resumed_step: int = 0) -> None:
        self.name, self.events, self.resumed_step = name, events, resumed_step
        self.world, self.alive = 1, True

    def step(self, batch: object) -> tuple[str, None]:
        self.events.append(f"{self.name} step")
        return self.name, None

    def checkpoint(self, step: int) -> None:
        self.events.append(f"{self.name} checkpoint {step}")

    def close(self) -> None:
        if self.alive:  # a second close does nothing, as Learner.close
            self.events.append(f"{self.name} close")
        self.alive = False


def test_a_replacement_keeps_the_weights_first_then_the_handle_steps_the_new_trainer():
    events: list[str] = []
    handle = LearnerHandle(FakeLearner("old", events))  # type: ignore[arg-type]
    handle.keep_before_close(lambda: events.append("pool keeps its weights"))
    handle.keep_before_close(lambda: events.append("lanes keep theirs"))
    assert handle.step(object()) == ("old", None)  # type: ignore[arg-type]
    handle.checkpoint(3)
    handle.retire()
    handle.attach(FakeLearner("new", events, resumed_step=3))  # type: ignore[arg-type]
    assert handle.resumed_step == 3 and handle.alive
    assert handle.step(object()) == ("new", None)  # type: ignore[arg-type]
    handle.close()
    assert events == [
        "old step",
        "old checkpoint 3",
        "lanes keep theirs",  # newest first: a publish of the lanes' lands in the pool before it keeps
        "pool keeps its weights",
        "old close",
        "new step",
        "new close",  # the run's end closes the trainer without copying weights
    ]


def test_a_trainer_left_behind_by_a_failed_replacement_is_closed_at_the_runs_end():
    events: list[str] = []
    handle = LearnerHandle(FakeLearner("old", events))  # type: ignore[arg-type]
    handle.retire()
    handle.attach(FakeLearner("mismatched", events, resumed_step=2))  # type: ignore[arg-type]
    handle.attach(FakeLearner("restored", events, resumed_step=3))  # type: ignore[arg-type]
    handle.close()
    assert events == ["old close", "restored close", "mismatched close"]
