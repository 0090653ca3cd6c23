"""ScoreStream over a fake teacher (no Ray): what is sent when, and what comes back in which order."""

import asyncio
import time

import numpy as np
import pytest
from step_fakes import TRAJECTORIES, FakePool, FakeTeacher

from services.contracts.teacher import TeacherContext
from services.errors import InputError
from services.orchestrator.step_data import supervised_trajectories
from services.orchestrator.teacher_scores import ScoreStream, Unscored, score_after_rollouts, teacher_limits
from services.teacher_scorer.validation import SequenceTooLongError

SUPERVISED = supervised_trajectories(TRAJECTORIES)


def top_ids(scores):
    return [s.top_ids[:, 0].tolist() for s in scores]


def test_each_chunk_is_one_request_and_scores_come_back_in_batch_order():
    teacher = FakeTeacher()
    with ScoreStream(teacher, top_k=2) as stream:
        rollout = FakePool().play([], 6, 1.0, 3, on_result=stream.submit)
        streamed = stream.collect(supervised_trajectories(rollout.trajectories))
    assert teacher.requests == [[3], [1, 3]]  # chunk a, b (b has nothing to score); chunk c, d
    whole, intervals = score_after_rollouts(FakeTeacher(), SUPERVISED, top_k=2)
    assert top_ids(streamed) == top_ids(whole) == [[2, 3, 6], [1], [2, 3, 4]]
    assert all(np.array_equal(a.entropy, b.entropy) for a, b in zip(streamed, whole, strict=True))
    assert len(stream.intervals) == 2 and len(intervals) == 1


def test_trajectories_never_submitted_are_scored_at_collect():
    teacher = FakeTeacher()
    with ScoreStream(teacher, top_k=2) as stream:
        stream.submit(FakePool().result(TRAJECTORIES[:2]))
        scores = stream.collect(SUPERVISED)
    assert teacher.requests == [[3], [1, 3]] and top_ids(scores) == [[2, 3, 6], [1], [2, 3, 4]]


class FailingTeacher:
    async def score_rows(self, rows, top_k):
        raise InputError("row 0: token id 99 is outside the vocabulary")


class HangingTeacher:
    async def score_rows(self, rows, top_k):
        await asyncio.sleep(600)


def test_a_failed_request_fails_collect_and_leaving_cancels_what_is_in_flight():
    with (
        pytest.raises(InputError, match="outside the vocabulary"),
        ScoreStream(FailingTeacher(), 2) as stream,
    ):
        stream.submit(FakePool().result(TRAJECTORIES))
        stream.collect(SUPERVISED)
    start = time.perf_counter()
    with ScoreStream(HangingTeacher(), 2) as stream:
        stream.submit(FakePool().result(TRAJECTORIES))
    assert time.perf_counter() - start < 5.0
    assert len(stream.intervals) == 1  # the cancelled request's time still counts
    stream.close()  # a second close does nothing


def test_each_trajectory_is_scored_by_its_sources_teacher_in_batch_order():
    a, c, d = SUPERVISED
    mixed = [a, c.model_copy(update={"env": "search"}), d]
    household, search = FakeTeacher(), FakeTeacher()
    scores, _ = score_after_rollouts({"alfworld": household, "search": search}, mixed, top_k=2)
    assert household.requests == [[3, 3]] and search.requests == [[1]]  # one request per teacher
    assert top_ids(scores) == [[2, 3, 6], [1], [2, 3, 4]]  # back in batch order
    with (
        ScoreStream({"alfworld": household}, top_k=2) as stream,
        pytest.raises(InputError, match="no teacher for env 'search'"),
    ):
        stream.collect(mixed)


def context(tokens):
    return TeacherContext(max_context=tokens, token_budget=16384)


def test_rows_end_at_the_last_response_token():
    teacher = FakeTeacher()
    score_after_rollouts(teacher, SUPERVISED, top_k=2)
    assert teacher.lengths == [[7, 2, 5]]  # a, c, d end at 7, 2 and 5 of their 12 tokens


def test_what_exceeds_its_teachers_limit_is_not_sent_and_comes_back_unscored():
    """a scores 7 tokens; its teacher takes 6: it is never sent, never scored as zero."""
    for stream in (False, True):
        teacher = FakeTeacher(max_context=6)
        limits = teacher_limits(teacher)
        assert limits == {None: context(6)}
        if stream:
            with ScoreStream(teacher, 2, limits=limits) as scoring:
                scoring.submit(FakePool().result(TRAJECTORIES))
                scores = scoring.collect(SUPERVISED)
        else:
            scores, _ = score_after_rollouts(teacher, SUPERVISED, top_k=2, limits=limits)
        assert scores[0] == Unscored("7 tokens to score exceed the teacher's context of 6")
        assert top_ids(scores[1:]) == [[1], [2, 3, 4]]
        assert [n for request in teacher.lengths for n in request] == [2, 5]


def test_a_teacher_that_lowered_its_limit_since_the_step_began_gets_the_rest_again():
    """The step asked before a restart (8192); the new replica refuses a, naming its limit of 6."""
    teacher = FakeTeacher(max_context=6)
    scores, _ = score_after_rollouts(teacher, SUPERVISED, top_k=2, limits={None: context(8192)})
    assert isinstance(scores[0], Unscored) and "exceed the teacher's context of 6" in scores[0].reason
    assert top_ids(scores[1:]) == [[1], [2, 3, 4]]
    assert teacher.lengths == [[7, 2, 5], [2, 5]]  # refused whole, then sent without a
    household, search = FakeTeacher(), FakeTeacher(max_context=4)
    mixed = [SUPERVISED[0], *(t.model_copy(update={"env": "search"}) for t in SUPERVISED[1:])]
    teachers = {"alfworld": household, "search": search}
    assert teacher_limits(teachers) == {"alfworld": context(8192), "search": context(4)}
    scores, _ = score_after_rollouts(teachers, mixed, top_k=2, limits=teacher_limits(teachers))
    assert [type(s).__name__ for s in scores] == ["TeacherScores", "TeacherScores", "Unscored"]
    assert household.lengths == [[7]] and search.lengths == [[2]]  # each source's own teacher's limit


class StubbornTeacher(FakeTeacher):
    """Refuses as too long a row within the limit it reports: a bug, not a restart."""

    async def score_rows(self, rows, top_k):
        raise SequenceTooLongError(0, rows[0].length, self.context)


def test_a_refusal_that_does_not_lower_the_limit_fails_the_request():
    teacher = StubbornTeacher()
    with pytest.raises(SequenceTooLongError, match="7 tokens exceed"):
        score_after_rollouts(teacher, SUPERVISED, top_k=2, limits=teacher_limits(teacher))
