"""Teacher scores for a step's trajectories, through the teacher Serve apps' handles (the run's
one, or each task source's): all at once after the rollouts (the synchronous step), or streamed
chunk by chunk while they play.

Each teacher scores sequences up to its ``TeacherContext.max_length``. ``teacher_limits`` asks
every teacher before a step, and the step gives each task its teacher's limit, so the rollouts
never grow a trajectory past it. A trajectory that is longer all the same (its teacher restarted
with a lower limit while the step played) is not sent: it comes back ``Unscored``, with the
reason, and the step drops it. A teacher that refuses a sequence as too long
(``SequenceTooLongError``, a replica whose limit dropped since the step began) names its limit;
what exceeds it is dropped and the rest sent again. Nothing is ever scored as zero.
"""

import asyncio
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from services.contracts.rollout import RolloutResult
from services.contracts.teacher import TeacherContext
from services.contracts.trajectory import Trajectory
from services.errors import InputError
from services.orchestrator.busy_time import Interval, PoolActivity
from services.orchestrator.step_data import (
    TeacherScores,
    scored_ids,
    scored_length,
    supervised_positions,
    supervised_trajectories,
)
from services.teacher_scorer.engine import RowScores, ScoreRow
from services.teacher_scorer.validation import SequenceTooLongError

log = logging.getLogger(__name__)


def score_rows(trajectories: Sequence[Trajectory]) -> list[ScoreRow]:
    """One row per trajectory: its token ids up to its last response token, and the positions of
    its response tokens."""
    return [
        ScoreRow(
            token_ids_T=np.asarray(scored_ids(tr), dtype=np.int64),
            positions_P=np.asarray(supervised_positions(tr)[0], dtype=np.int64),
        )
        for tr in trajectories
    ]


class TeacherClient(Protocol):
    """What scoring needs of a teacher (``TeacherHandleClient`` is the real one)."""

    async def score_rows(self, rows: Sequence[ScoreRow], top_k: int | None = None) -> list[RowScores]: ...

    async def limits(self) -> TeacherContext: ...


# The run's teacher, or each task source's by env (a multi-environment run).
Teachers = TeacherClient | Mapping[str, TeacherClient]
# Each teacher's limits: the run's one teacher under None, or each source's teacher under its env.
TeacherLimits = Mapping[str | None, TeacherContext]


@dataclass(frozen=True)
class Unscored:
    """A trajectory its teacher cannot score (longer than it takes); the step drops it."""

    reason: str


def teacher_limits(teachers: Teachers) -> dict[str | None, TeacherContext]:
    """Ask each teacher the longest sequence it scores now (one call per teacher app)."""

    async def ask() -> dict[str | None, TeacherContext]:
        if not isinstance(teachers, Mapping):
            return {None: await teachers.limits()}
        apps: dict[int, TeacherClient] = {id(client): client for client in teachers.values()}
        answers = dict(zip(apps, await asyncio.gather(*(c.limits() for c in apps.values())), strict=True))
        return {env: answers[id(client)] for env, client in teachers.items()}

    return asyncio.run(ask())


def limit_of(limits: TeacherLimits | None, env: str | None) -> TeacherContext | None:
    """The limits of ``env``'s teacher (None: not known); the run's one teacher's for every env."""
    if limits is None:
        return None
    return limits[env] if env in limits else limits.get(None)


def teacher_groups(
    teachers: Teachers, trajectories: Sequence[Trajectory]
) -> list[tuple[str | None, TeacherClient, list[int]]]:
    """The trajectories (by index) each teacher scores: all of them by the run's one teacher (env
    None), else each by its env's."""
    if not isinstance(teachers, Mapping):
        return [(None, teachers, list(range(len(trajectories))))]
    groups: dict[str, list[int]] = {}
    for i, tr in enumerate(trajectories):
        if tr.env not in teachers:
            raise InputError(f"no teacher for env {tr.env!r}; the run's teachers score {sorted(teachers)}")
        groups.setdefault(tr.env, []).append(i)
    return [(env, teachers[env], indices) for env, indices in groups.items()]


Scored = TeacherScores | Unscored


async def teacher_scores(
    teachers: Teachers,
    trajectories: Sequence[Trajectory],
    top_k: int,
    limits: TeacherLimits | None = None,
) -> list[Scored]:
    """Top-K and entropy of each trajectory, in order, each from its teacher (one request per
    teacher, concurrently), or ``Unscored`` where it is longer than its teacher takes; every one
    must have supervised tokens. ``limits``: each teacher's, as known before the request (None:
    only what a teacher's refusal tells)."""
    if not trajectories:
        return []
    groups = teacher_groups(teachers, trajectories)
    answers = await asyncio.gather(
        *(
            _score_group(client, [trajectories[i] for i in indices], top_k, limit_of(limits, env))
            for env, client, indices in groups
        )
    )
    out: list[Scored | None] = [None] * len(trajectories)
    for (_, _, indices), results in zip(groups, answers, strict=True):
        for i, r in zip(indices, results, strict=True):
            out[i] = r
    return [s for s in out if s is not None]


async def _score_group(
    client: TeacherClient, trajectories: Sequence[Trajectory], top_k: int, limit: TeacherContext | None
) -> list[Scored]:
    """One teacher's scores of ``trajectories``; what exceeds its limit is ``Unscored``. A refusal
    as too long lowers the limit to the refusing replica's (strictly: the refused row was within
    the one before), so this ends."""
    out: list[Scored | None] = [None] * len(trajectories)
    while True:
        if limit is not None:
            for i, tr in enumerate(trajectories):
                if out[i] is None and scored_length(tr) > limit.max_length:
                    out[i] = Unscored(f"{scored_length(tr)} tokens to score exceed {limit.limit_text}")
        send = [i for i, s in enumerate(out) if s is None]
        if not send:
            return [s for s in out if s is not None]
        try:
            results = await client.score_rows(score_rows([trajectories[i] for i in send]), top_k)
        except SequenceTooLongError as exc:
            if limit is not None and exc.context.max_length >= limit.max_length:
                raise  # not a lower limit: the trajectory was sent past the limit the caller gave
            log.warning(
                "the teacher now scores at most %d tokens (%s), less than when the step began; "
                "dropping what exceeds it",
                exc.context.max_length,
                exc.context.limit_text,
            )
            limit = exc.context
            continue
        for i, r in zip(send, results, strict=True):
            out[i] = TeacherScores(r.top_ids_P_K, r.top_logprobs_P_K, r.entropy_P)


def score_after_rollouts(
    client: Teachers,
    trajectories: Sequence[Trajectory],
    top_k: int,
    activity: PoolActivity | None = None,
    limits: TeacherLimits | None = None,
) -> tuple[list[Scored], list[Interval]]:
    """The synchronous step's scoring: every trajectory in one request once the rollouts are done.

    ``activity``: where the teacher's work is also marked as it happens (the overlapped pipeline);
    ``limits``: each teacher's, as the step began.
    """
    start = time.perf_counter()
    with teacher_busy(activity):
        scores = asyncio.run(teacher_scores(client, trajectories, top_k, limits))
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

    def __init__(
        self,
        client: Teachers,
        top_k: int,
        activity: PoolActivity | None = None,
        limits: TeacherLimits | None = None,
    ) -> None:
        self._client = client
        self._top_k = top_k
        self._activity = activity
        self._limits = limits
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="teacher-stream", daemon=True)
        # id(trajectory) -> (the trajectory, its request, its row in the request)
        self._submitted: dict[int, tuple[Trajectory, Future[list[Scored]], int]] = {}
        self.intervals: list[Interval] = []

    def __enter__(self) -> "ScoreStream":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, result: RolloutResult) -> None:
        """Send a finished chunk's supervised trajectories to the teacher."""
        self._send(supervised_trajectories(result.trajectories))

    def collect(self, trajectories: Sequence[Trajectory]) -> list[Scored]:
        """Scores of ``trajectories`` (all supervised), in their order (``Unscored`` where too long for
        their teacher); waits for requests in flight."""
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

    async def _score(self, trajectories: list[Trajectory]) -> list[Scored]:
        start = time.perf_counter()
        try:
            with teacher_busy(self._activity):
                return await teacher_scores(self._client, trajectories, self._top_k, self._limits)
        finally:
            self.intervals.append((start, time.perf_counter()))


async def _cancel_others() -> None:
    """Cancel every other task of the running loop and wait until they are done."""
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
