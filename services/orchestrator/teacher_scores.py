"""Teacher scores for a step's trajectories, through the `teacher` Serve app's handle."""

from collections.abc import Sequence

import numpy as np

from services.contracts.trajectory import Trajectory
from services.orchestrator.step_data import TeacherScores, supervised_positions
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


async def teacher_scores(
    client: TeacherHandleClient, trajectories: Sequence[Trajectory], top_k: int
) -> list[TeacherScores]:
    """Top-K and entropy of each trajectory, in order; every one must have supervised tokens."""
    if not trajectories:
        return []
    results = await client.score_rows(score_rows(trajectories), top_k)
    return [TeacherScores(r.top_ids_P_K, r.top_logprobs_P_K, r.entropy_P) for r in results]
