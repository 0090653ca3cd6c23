"""The dispatcher part of the step loop: plays a step's tasks on the rollout pool and has them
scored (``scorer.py``); the pool's own worker restarts and replays stay inside it.

The pool's calls block (Ray gets, many workers): each runs off the loop (``blocking``), and a
chunk the pool hands over mid-play reaches the scorer on the loop's thread.
"""

import asyncio
import time
from collections.abc import Sequence

from services.blocking import OffLoop
from services.contracts.rollout import EpisodeTask, RolloutResult
from services.orchestrator.busy_time import PoolActivity
from services.orchestrator.run_plan import PlaySettings
from services.orchestrator.scorer import StepScores
from services.orchestrator.step import Played, RolloutPoolLike, played_at, tasks_within, trained_part
from services.orchestrator.step_data import supervised_trajectories
from services.orchestrator.teacher_scores import Teachers, teacher_limits


class Dispatcher:
    def __init__(
        self, plan: PlaySettings, pool: RolloutPoolLike, teachers: Teachers, activity: PoolActivity
    ) -> None:
        self.plan = plan
        self.pool = pool
        self.teachers = teachers
        self.activity = activity
        self.calls = OffLoop()  # the pool's calls: a play, a publish, an evaluation

    @property
    def weights_version(self) -> int:
        """The version the pool plays now."""
        return self.pool.weights_version

    async def play(
        self, k: int, tasks: Sequence[EpisodeTask], depths: int | Sequence[int], version: int
    ) -> Played:
        """Play step k's tasks (``depths``: the turn cap of all, or of each) with weights ``version``
        and score each by its source's teacher: streamed while they play, or after them. What
        cannot be trained on is dropped with its reason (``trained_part``)."""
        plan = self.plan
        limits = await teacher_limits(self.teachers)  # each step: a restarted teacher's limit counts from now
        tasks = tasks_within(tasks, limits)
        loop = asyncio.get_running_loop()
        async with StepScores(self.teachers, plan.top_k, limits, self.activity) as scores:

            def handed_over(chunk: RolloutResult) -> None:  # on the pool's thread
                loop.call_soon_threadsafe(scores.submit, chunk)

            started = time.perf_counter()
            with self.activity.busy("rollout"):
                rollout = await self.calls.call(
                    self.pool.play,
                    tasks,
                    depths,
                    plan.temperature,
                    version,
                    on_result=handed_over if plan.stream_teacher else None,
                )
            done = played_at(k, tasks, rollout, plan.max_infra_failure_frac)
            supervised = supervised_trajectories(rollout.trajectories)
            scored = await scores.collect(supervised)
        played = Played(rollout, supervised, [], started, done, scores.intervals)
        return trained_part(k, tasks, played, scored, plan.max_new_tokens)
