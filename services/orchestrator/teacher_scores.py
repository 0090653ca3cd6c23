"""Teacher top-K scores for a step's trajectories, through the `teacher` Serve app's handle."""

from collections.abc import Sequence

import numpy as np

from services.contracts.trajectory import Trajectory
from services.learner.samples import TeacherTopK, supervised_positions
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


async def teacher_topk(
    client: TeacherHandleClient, trajectories: Sequence[Trajectory], top_k: int
) -> tuple[list[TeacherTopK], list[np.ndarray]]:
    """(top-K per trajectory, teacher entropy per supervised token per trajectory)."""
    scored = [tr for tr in trajectories if sum(tr.turn_tokens) > 0]
    results = await client.score_rows(score_rows(scored), top_k) if scored else []
    by_id = {tr.episode_id: r for tr, r in zip(scored, results, strict=True)}
    empty_ids = np.zeros((0, top_k), dtype=np.int64)
    empty_lp = np.zeros((0, top_k), dtype=np.float32)
    topk, entropy = [], []
    for tr in trajectories:
        r = by_id.get(tr.episode_id)
        topk.append(TeacherTopK(r.top_ids_P_K, r.top_logprobs_P_K) if r else TeacherTopK(empty_ids, empty_lp))
        entropy.append(r.entropy_P if r else np.zeros(0, dtype=np.float32))
    return topk, entropy
