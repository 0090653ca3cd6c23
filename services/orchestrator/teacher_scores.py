"""Teacher scores for a step's trajectories, through the teacher Serve apps' handles (the run's
one, or each task source's): all at once after the rollouts (the synchronous step), or streamed
chunk by chunk while they play."""

import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext

import numpy as np

from services.contracts.rollout import RolloutResult
from services.contracts.trajectory import Trajectory
from services.errors import InputError
from services.orchestrator.busy_time import Interval, PoolActivity
from services.orchestrator.step_data import TeacherScores, supervised_positions, supervised_trajectories
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.handle_client import TeacherHandleClient


def score_rows(trajectories: Sequence[Trajectory]) -> list[ScoreRow]:
    """One row per trajectory: its token ids and the positions of its response tokens."""
    return [
        ScoreRow(
            token_ids_T=np.asarray(tr.token_ids, dtype=np.int64),
            positions_P=np.asarray(supervised_positions(tr)[0], dtype=np.int64),
        )
        for tr in trajectories
    ]


# The run's teacher, or each task source's by env (a multi-environment run).
Teachers = TeacherHandleClient | Mapping[str, TeacherHandleClient]


def teacher_groups(
    teachers: Teachers, trajectories: Sequence[Trajectory]
) -> list[tuple[TeacherHandleClient, list[int]]]:
    """The trajectories (by index) each teacher scores: all of them by the run's one teacher, else
    each by its env's."""
    if not isinstance(teachers, Mapping):
        return [(teachers, list(range(len(trajectories))))]
    groups: dict[str, list[int]] = {}
    for i, tr in enumerate(trajectories):
        if tr.env not in teachers:
            raise InputError(f"no teacher for env {tr.env!r}; the run's teachers score {sorted(teachers)}")
        groups.setdefault(tr.env, []).append(i)
    return [(teachers[env], indices) for env, indices in groups.items()]


async def teacher_scores(
    teachers: Teachers, trajectories: Sequence[Trajectory], top_k: int
) -> list[TeacherScores]:
    """Top-K and entropy of each trajectory, in order, each from its teacher (one request per
    teacher, concurrently); every one must have supervised tokens."""
    if not trajectories:
        return []
    groups = teacher_groups(teachers, trajectories)
    answers = await asyncio.gather(
        *(
            client.score_rows(score_rows([trajectories[i] for i in indices]), top_k)
            for client, indices in groups
        )
    )
    out: list[TeacherScores | None] = [None] * len(trajectories)
    for (_, indices), results in zip(groups, answers, strict=True):
        for i, r in zip(indices, results, strict=True):
            out[i] = TeacherScores(r.top_ids_P_K, r.top_logprobs_P_K, r.entropy_P)
    return [s for s in out if s is not None]


def score_after_rollouts(
    client: Teachers,
    trajectories: Sequence[Trajectory],
    top_k: int,
    activity: PoolActivity | None = None,
) -> tuple[list[TeacherScores], list[Interval]]:
    """The synchronous step's scoring: every trajectory in one request once the rollouts are done.

    ``activity``: where the teacher's work is also marked as it happens (the overlapped pipeline).
    """
    start = time.perf_counter()
    with teacher_busy(activity):
        scores = asyncio.run(teacher_scores(client, trajectories, top_k))
    return scores, [(start, time.perf_counter())]


def teacher_busy(activity: PoolActivity | None) -> AbstractContextManager[None]:
    """Mark the teacher busy in ``activity`` for a block (nothing without one)."""
    return nullcontext() if activity is None else activity.busy("teacher")


class ScoreStream:
    """Scores each rollout chunk as the pool hands it over, while the step's other chunks still play.

    ``submit`` (the pool's ``on_result``) sends the chunk's supervised trajectories to the teacher
    as one request, on an event loop of its own thread; ``collect`` returns the scores of the whole
    batch in batch order, scoring anything that was not submitted. ``intervals`` records when each
    request was in flight. Use it as a context manager: leaving it cancels what is still in flight.
    """

    def __init__(self, client: Teachers, top_k: int, activity: PoolActivity | None = None) -> None:
        self._client = client
        self._top_k = top_k
        self._activity = activity
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="teacher-stream", daemon=True)
        # id(trajectory) -> (the trajectory, its request, its row in the request)
        self._submitted: dict[int, tuple[Trajectory, Future[list[TeacherScores]], int]] = {}
        self.intervals: list[Interval] = []

    def __enter__(self) -> "ScoreStream":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, result: RolloutResult) -> None:
        """Send a finished chunk's supervised trajectories to the teacher."""
        self._send(supervised_trajectories(result.trajectories))

    def collect(self, trajectories: Sequence[Trajectory]) -> list[TeacherScores]:
        """Scores of ``trajectories`` (all supervised), in their order; waits for requests in flight."""
        self._send([tr for tr in trajectories if not self._holds(tr)])
        out = []
        for tr in trajectories:
            _, request, row = self._submitted[id(tr)]
            out.append(request.result()[row])
        return out

    def close(self) -> None:
        """Cancel the requests still in flight and stop the loop's thread (a second call does nothing)."""
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(_cancel_others(), self._loop).result()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()

    def _holds(self, trajectory: Trajectory) -> bool:
        entry = self._submitted.get(id(trajectory))
        return entry is not None and entry[0] is trajectory

    def _send(self, trajectories: list[Trajectory]) -> None:
        if not trajectories:
            return
        request = asyncio.run_coroutine_threadsafe(self._score(trajectories), self._loop)
        for row, tr in enumerate(trajectories):
            self._submitted[id(tr)] = (tr, request, row)

    async def _score(self, trajectories: list[Trajectory]) -> list[TeacherScores]:
        start = time.perf_counter()
        try:
            with teacher_busy(self._activity):
                return await teacher_scores(self._client, trajectories, self._top_k)
        finally:
            self.intervals.append((start, time.perf_counter()))


async def _cancel_others() -> None:
    """Cancel every other task of the running loop and wait until they are done."""
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
