"""Teacher scores for a step's trajectories, through the teacher Serve apps' handles (the run's
one, or each task source's); ``scorer.py`` sends them, on the driver's loop.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from services.contracts.teacher import TeacherContext
from services.contracts.trajectory import Trajectory
from services.errors import InputError
from services.orchestrator.step_data import TeacherScores, scored_ids, scored_length, supervised_positions
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


async def teacher_limits(teachers: Teachers) -> dict[str | None, TeacherContext]:
    """Ask each teacher the longest sequence it scores now (one call per teacher app)."""
    if not isinstance(teachers, Mapping):
        return {None: await teachers.limits()}
    apps: dict[int, TeacherClient] = {id(client): client for client in teachers.values()}
    answers = dict(zip(apps, await asyncio.gather(*(c.limits() for c in apps.values())), strict=True))
    return {env: answers[id(client)] for env, client in teachers.items()}


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
