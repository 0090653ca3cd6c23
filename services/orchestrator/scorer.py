"""The scorer part of the step loop: one step's teacher scores, requested on the driver's event loop.

Streamed (``[pipeline] stream_teacher``), each rollout chunk's supervised trajectories go to their
teacher as one request as soon as the pool hands the chunk over (``submit``), while the step's
other chunks still play; otherwise nothing is submitted and ``collect`` sends the whole batch in
one request once the rollouts are done. Either way ``collect`` returns the scores in batch order.
Use it as an async context manager: leaving it cancels what is still in flight.
"""

import asyncio
import time
from collections.abc import Sequence

from services.contracts.rollout import RolloutResult
from services.contracts.trajectory import Trajectory
from services.orchestrator.busy_time import Interval, PoolActivity
from services.orchestrator.step_data import supervised_trajectories
from services.orchestrator.teacher_scores import Scored, TeacherLimits, Teachers, teacher_scores


class StepScores:
    """Teacher requests of one step; ``intervals`` records when each was in flight."""

    def __init__(
        self, teachers: Teachers, top_k: int, limits: TeacherLimits | None, activity: PoolActivity
    ) -> None:
        self._teachers = teachers
        self._top_k = top_k
        self._limits = limits
        self._activity = activity
        # id(trajectory) -> (the trajectory, its request, its row in the request)
        self._requests: dict[int, tuple[Trajectory, asyncio.Task[list[Scored]], int]] = {}
        self.intervals: list[Interval] = []

    async def __aenter__(self) -> "StepScores":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cancel()

    def submit(self, result: RolloutResult) -> None:
        """Send a finished chunk's supervised trajectories to their teachers (on the loop's thread)."""
        self._send(supervised_trajectories(result.trajectories))

    async def collect(self, trajectories: Sequence[Trajectory]) -> list[Scored]:
        """Scores of ``trajectories`` (all supervised), in their order (``Unscored`` where too long
        for their teacher), sending what was not submitted; waits for the requests in flight."""
        self._send([tr for tr in trajectories if not self._holds(tr)])
        out = []
        for tr in trajectories:
            _, request, row = self._requests[id(tr)]
            out.append((await request)[row])
        return out

    async def cancel(self) -> None:
        """Cancel the requests still in flight and wait until they are done."""
        pending = {request for _, request, _ in self._requests.values() if not request.done()}
        for request in pending:
            request.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def _holds(self, trajectory: Trajectory) -> bool:
        entry = self._requests.get(id(trajectory))
        return entry is not None and entry[0] is trajectory

    def _send(self, trajectories: list[Trajectory]) -> None:
        if not trajectories:
            return
        request = asyncio.ensure_future(self._score(trajectories))
        for row, tr in enumerate(trajectories):
            self._requests[id(tr)] = (tr, request, row)

    async def _score(self, trajectories: list[Trajectory]) -> list[Scored]:
        start = time.perf_counter()
        try:
            with self._activity.busy("teacher"):
                return await teacher_scores(self._teachers, trajectories, self._top_k, self._limits)
        finally:
            self.intervals.append((start, time.perf_counter()))
