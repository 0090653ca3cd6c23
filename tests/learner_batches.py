"""Synthetic but real learner batches: random multi-turn token sequences scored by a real tiny teacher."""

import random
from pathlib import Path

import numpy as np
import torch

from services.contracts.learner import LearnerBatch
from services.contracts.trajectory import Trajectory, TurnRecord
from services.orchestrator.step_data import TeacherScores, learner_samples, supervised_positions


def random_trajectory(rng: random.Random, vocab: int, index: int) -> Trajectory:
    """Prompt tokens, then turns of (response span, observation tokens)."""
    ids = [rng.randrange(vocab) for _ in range(rng.randint(3, 6))]
    turns = []
    for t in range(rng.randint(1, 4)):
        start = len(ids)
        ids += [rng.randrange(vocab) for _ in range(rng.randint(2, 6))]
        turns.append(
            TurnRecord(
                index=t,
                response_start=start,
                response_end=len(ids),
                action="a",
                accepted=True,
                observation="o",
            )
        )
        ids += [rng.randrange(vocab) for _ in range(rng.randint(1, 3))]
    n = sum(t.response_end - t.response_start for t in turns)
    return Trajectory(
        episode_id=f"ep-{index}",
        env="synthetic",
        split="train",
        token_ids=ids,
        turns=turns,
        sampler_logprobs=[-1.0 - 0.1 * rng.random() for _ in range(n)],
        reward=float(index % 2),
        success=index % 2 == 1,
        truncated=False,
        weights_version=0,
    )


def teacher_topk(teacher_dir: Path, trajectory: Trajectory, k: int) -> TeacherScores:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(teacher_dir)
    positions, _ = supervised_positions(trajectory)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([trajectory.token_ids])).logits[0]
    lp = torch.log_softmax(logits[torch.tensor(positions) - 1].float(), -1)
    top = lp.topk(k, dim=-1)
    return TeacherScores(top_ids=top.indices.numpy().astype(np.int64), top_logprobs=top.values.numpy())


def make_batch(
    teacher_dir: Path, step: int, n: int = 6, k: int = 8, alpha: float = 0.5, seed: int = 0
) -> LearnerBatch:
    rng = random.Random(seed * 1000 + step)
    trajectories = [random_trajectory(rng, 64, i) for i in range(n)]
    scores = [teacher_topk(teacher_dir, tr, k) for tr in trajectories]
    samples = learner_samples(trajectories, scores, alpha=alpha, min_floor=2, min_frac=0.1)
    return LearnerBatch(step=step, probe=True, alpha=alpha, h_roll=4, samples=samples)
