"""The scorer (``StepScores``) over a fake teacher (no Ray): what is sent when, and what comes back in
which order."""

import asyncio

import numpy as np
import pytest
from step_fakes import TRAJECTORIES, FakePool, FakeTeacher

from services.contracts.teacher import TeacherContext
from services.errors import InputError
from services.orchestrator.busy_time import PoolActivity
from services.orchestrator.scorer import StepScores
from services.orchestrator.step_data import supervised_trajectories
from services.orchestrator.teacher_scores import Unscored, teacher_limits
from services.teacher_scorer.validation import SequenceTooLongError

SUPERVISED = supervised_trajectories(TRAJECTORIES)


def scored(teachers, trajectories, chunks=(), limits=None, top_k=2):
    """Scores of ``trajectories`` after ``chunks`` (rollout results) were submitted, and the
    requests' intervals."""

    async def score():
        async with StepScores(teachers, top_k, limits, PoolActivity()) as scores:
            for chunk in chunks:
                scores.submit(chunk)
            return await scores.collect(trajectories), scores.intervals

    return asyncio.run(score())


def limits_of(teachers):
    return asyncio.run(teacher_limits(teachers))


def top_ids(scores):
    return [s.top_ids[:, 0].tolist() for s in scores]


def test_each_chunk_is_one_request_and_scores_come_back_in_batch_order():
    teacher, chunks = FakeTeacher(), []
    rollout = FakePool().play([], 6, 1.0, 3, on_result=chunks.append)
    streamed, streamed_intervals = scored(teacher, supervised_trajectories(rollout.trajectories), chunks)
    assert teacher.requests == [[3], [1, 3]]  # chunk a, b (b has nothing to score); chunk c, d
    whole, intervals = scored(FakeTeacher(), SUPERVISED)
    assert top_ids(streamed) == top_ids(whole) == [[2, 3, 6], [1], [2, 3, 4]]
    assert all(np.array_equal(a.entropy, b.entropy) for a, b in zip(streamed, whole, strict=True))
    assert len(streamed_intervals) == 2 and len(intervals) == 1


def test_trajectories_never_submitted_are_scored_at_collect():
    teacher = FakeTeacher()
    scores, _ = scored(teacher, SUPERVISED, [FakePool().result(TRAJECTORIES[:2])])
    assert teacher.requests == [[3], [1, 3]] and top_ids(scores) == [[2, 3, 6], [1], [2, 3, 4]]


class FailingTeacher:
    async def score_rows(self, rows, top_k):
        raise InputError("row 0: token id 99 is outside the vocabulary")


class HangingTeacher:
    async def score_rows(self, rows, top_k):
        await asyncio.sleep(600)


def test_a_failed_request_fails_collect_and_leaving_cancels_what_is_in_flight():
    with pytest.raises(InputError, match="outside the vocabulary"):
        scored(FailingTeacher(), SUPERVISED, [FakePool().result(TRAJECTORIES)])

    async def leave_while_in_flight():
        async with StepScores(HangingTeacher(), 2, None, PoolActivity()) as scores:
            scores.submit(FakePool().result(TRAJECTORIES))
            await asyncio.sleep(0)  # the request is sent
            (_, request, _) = next(iter(scores._requests.values()))
        return scores, request

    scores, request = asyncio.run(asyncio.wait_for(leave_while_in_flight(), 30))
    assert request.cancelled()  # leaving cancelled it: nothing waits the teacher's 600 s
    assert len(scores.intervals) == 1  # the cancelled request's time still counts


def test_each_trajectory_is_scored_by_its_sources_teacher_in_batch_order():
    a, c, d = SUPERVISED
    mixed = [a, c.model_copy(update={"env": "search"}), d]
    household, search = FakeTeacher(), FakeTeacher()
    scores, _ = scored({"alfworld": household, "search": search}, mixed)
    assert household.requests == [[3, 3]] and search.requests == [[1]]  # one request per teacher
    assert top_ids(scores) == [[2, 3, 6], [1], [2, 3, 4]]  # back in batch order
    with pytest.raises(InputError, match="no teacher for env 'search'"):
        scored({"alfworld": household}, mixed)


def context(tokens):
    return TeacherContext(max_context=tokens, token_budget=16384)


def test_rows_end_at_the_last_response_token():
    teacher = FakeTeacher()
    scored(teacher, SUPERVISED)
    assert teacher.lengths == [[7, 2, 5]]  # a, c, d end at 7, 2 and 5 of their 12 tokens


def test_what_exceeds_its_teachers_limit_is_not_sent_and_comes_back_unscored():
    """a scores 7 tokens; its teacher takes 6: it is never sent, never scored as zero."""
    for stream in (False, True):
        teacher = FakeTeacher(max_context=6)
        limits = limits_of(teacher)
        assert limits == {None: context(6)}
        chunks = [FakePool().result(TRAJECTORIES)] if stream else []
        scores, _ = scored(teacher, SUPERVISED, chunks, limits=limits)
        assert scores[0] == Unscored("7 tokens to score exceed the teacher's context of 6")
        assert top_ids(scores[1:]) == [[1], [2, 3, 4]]
        assert [n for request in teacher.lengths for n in request] == [2, 5]


def test_a_teacher_that_lowered_its_limit_since_the_step_began_gets_the_rest_again():
    """The step asked before a restart (8192); the new replica refuses a, naming its limit of 6."""
    teacher = FakeTeacher(max_context=6)
    scores, _ = scored(teacher, SUPERVISED, limits={None: context(8192)})
    assert isinstance(scores[0], Unscored) and "exceed the teacher's context of 6" in scores[0].reason
    assert top_ids(scores[1:]) == [[1], [2, 3, 4]]
    assert teacher.lengths == [[7, 2, 5], [2, 5]]  # refused whole, then sent without a
    household, search = FakeTeacher(), FakeTeacher(max_context=4)
    mixed = [SUPERVISED[0], *(t.model_copy(update={"env": "search"}) for t in SUPERVISED[1:])]
    teachers = {"alfworld": household, "search": search}
    assert limits_of(teachers) == {"alfworld": context(8192), "search": context(4)}
    scores, _ = scored(teachers, mixed, limits=limits_of(teachers))
    assert [type(s).__name__ for s in scores] == ["TeacherScores", "TeacherScores", "Unscored"]
    assert household.lengths == [[7]] and search.lengths == [[2]]  # each source's own teacher's limit


class StubbornTeacher(FakeTeacher):
    """Refuses as too long a row within the limit it reports: a bug, not a restart."""

    async def score_rows(self, rows, top_k):
        raise SequenceTooLongError(0, rows[0].length, self.context)


def test_a_refusal_that_does_not_lower_the_limit_fails_the_request():
    teacher = StubbornTeacher()
    with pytest.raises(SequenceTooLongError, match="7 tokens exceed"):
        scored(teacher, SUPERVISED, limits=limits_of(teacher))
