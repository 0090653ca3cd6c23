"""ScoreStream over a fake teacher (no Ray): what is sent when, and what comes back in which order."""

import asyncio
import time

import numpy as np
import pytest
from step_fakes import TRAJECTORIES, FakePool, FakeTeacher

from services.errors import InputError
from services.orchestrator.step_data import supervised_trajectories
from services.orchestrator.teacher_scores import ScoreStream, score_after_rollouts

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
