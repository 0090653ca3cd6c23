"""What a smaller top-K costs: the token KL and the loss at K = 20 (vLLM's default --max-logprobs,
and about what hosted APIs allow) against K = 50 (our default), from the same teacher on the demo's
trajectories, with the full-vocabulary reverse KL (K = V) as what both approximate.

Plays ``--episodes`` episodes of the demo's first step (configs/demo.toml: the student
student-novel-cut3 samples at the run's temperature, up to ``--turns`` turns) through a rollout
worker in this process against a local env gateway; the teacher teacher-novel scores every response
token at K = 50. The project's own loss (``objective.full_logits_loss``, the run's support and
clip, the step's blended weights at alpha 0) is then evaluated on the same batch three times: with
the teacher's top 50, with its top 20 (the first 20 rows of the same answer: exactly what a server
capped at 20 returns) and with every token. Prints the mean token KL and the loss of each, the
per-token gap between K = 20 and K = 50, the teacher mass each K holds, and the cosine between the
loss gradients (what the optimizer would see).

    PYTHONPATH=$PWD python bench/topk_cost.py [--episodes 4] [--turns 8]
"""

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from services.contracts.rollout import RolloutRequest
from services.contracts.trajectory import Trajectory
from services.env_gateway.local_server import LocalGateway
from services.learner.objective import collate, full_logits_loss
from services.models.loading import load_causal_lm, load_tokenizer
from services.models.registry import resolve_model_dir
from services.orchestrator.step_data import TeacherScores, learner_samples, scored_ids, supervised_positions
from services.orchestrator.tasks import step_tasks
from services.rollout_worker.actor import RolloutWorkerService
from services.settings import load_settings
from services.settings.tree import TurnOPDSettings
from services.teacher_scorer.engine import ScoreRow
from services.teacher_scorer.scorer import TeacherScorer
from services.teacher_scorer.transformers_engine import TransformersEngine, load_teacher_model

CONFIG = Path(__file__).parents[1] / "configs" / "demo.toml"
K_SMALL, K_LARGE = 20, 50


def play(settings: TurnOPDSettings, episodes: int, turns: int) -> list[Trajectory]:
    """The demo's first-step tasks, played by the student in this process."""
    source = settings.task_sources()[0]
    tasks = step_tasks(source.env, source.split, episodes, 1, 1, settings.run.seed, source.task_types)
    with LocalGateway(workers=1) as gateway:
        worker = RolloutWorkerService(settings.for_rollout_worker(), 0, gateway.url)
        request = RolloutRequest(
            tasks=tasks, h_roll=turns, temperature=settings.rollout.temperature, weights_version=0, seed=0
        )
        result = worker.play(request)
    return [t for t in result.trajectories if sum(t.turn_tokens) > 0]


def teacher_scores(settings: TurnOPDSettings, trajectories: list[Trajectory]) -> list[TeacherScores]:
    """The teacher's top-K_LARGE at every response token, as the run's teacher app scores them."""
    path = resolve_model_dir(settings.models.teacher, settings.models.cache_dir)
    scorer = TeacherScorer(
        TransformersEngine(load_teacher_model(path, "cpu", "float32")), token_budget=8192, max_batch_size=8
    )
    rows = [
        ScoreRow(
            np.asarray(scored_ids(t), dtype=np.int64), np.asarray(supervised_positions(t)[0], dtype=np.int64)
        )
        for t in trajectories
    ]
    scores, _ = scorer.score(rows, [K_LARGE] * len(rows))
    return [TeacherScores(s.top_ids_P_K, s.top_logprobs_P_K, s.entropy_P) for s in scores]


@torch.no_grad()
def full_vocabulary(settings: TurnOPDSettings, trajectories: list[Trajectory]) -> list[TeacherScores]:
    """Every token's teacher log-prob at each response token, ranked: K = V."""
    teacher = load_causal_lm(settings.models.teacher, cache_dir=settings.models.cache_dir)
    out = []
    for t in trajectories:
        positions = torch.tensor(supervised_positions(t)[0])
        logits = teacher(input_ids=torch.tensor([scored_ids(t)])).logits[0, positions - 1]
        lp_N_V = torch.log_softmax(logits.float(), dim=-1)
        ranked_lp, ranked_ids = lp_N_V.sort(dim=-1, descending=True)
        out.append(TeacherScores(ranked_ids.numpy(), ranked_lp.numpy()))
    return out


def loss_and_grad(
    settings: TurnOPDSettings,
    student: torch.nn.Module,
    trajectories: list[Trajectory],
    scores: list[TeacherScores],
) -> tuple[float, torch.Tensor, torch.Tensor]:
    """(loss, per-token KL, flat gradient) of the run's objective with these teacher scores."""
    blend = settings.blend
    samples = learner_samples(trajectories, scores, 0.0, blend.min_floor, blend.min_frac)
    pad = load_tokenizer(settings.models.student, settings.models.cache_dir).pad_token_id or 0
    batch = collate(samples, pad, torch.device("cpu"))
    student.zero_grad(set_to_none=True)
    loss, kl_N = full_logits_loss(student, batch, settings.distill.topk_support, settings.distill.clip_ratio)
    loss.backward()
    grad = torch.cat([p.grad.flatten() for p in student.parameters() if p.grad is not None])
    return loss.item(), kl_N, grad


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a, b, dim=0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--turns", type=int, default=8)
    args = parser.parse_args()
    settings = load_settings(CONFIG)
    torch.manual_seed(0)

    started = time.perf_counter()
    trajectories = play(settings, args.episodes, args.turns)
    played = time.perf_counter() - started
    large = teacher_scores(settings, trajectories)
    small = [TeacherScores(s.top_ids[:, :K_SMALL], s.top_logprobs[:, :K_SMALL], s.entropy) for s in large]
    full = full_vocabulary(settings, trajectories)
    student = load_causal_lm(settings.models.student, cache_dir=settings.models.cache_dir)
    student.train()
    results = {
        k: loss_and_grad(settings, student, trajectories, s)
        for k, s in ((K_SMALL, small), (K_LARGE, large), ("V", full))
    }

    tokens = sum(s.top_ids.shape[0] for s in large)
    turns = sum(len(t.turns) for t in trajectories)
    print(
        f"{len(trajectories)} demo episodes ({turns} turns, {tokens} response tokens) played in {played:.0f} s; "
        f"student {settings.models.student}, teacher {settings.models.teacher}, support "
        f"{settings.distill.topk_support}"
    )
    for k, scores in ((K_SMALL, small), (K_LARGE, large)):
        mass = np.concatenate([np.exp(s.top_logprobs.astype(np.float64)).sum(-1) for s in scores])
        print(
            f"teacher mass in its top-{k}: mean {mass.mean():.4f}, 5th percentile {np.percentile(mass, 5):.4f}"
        )
    print("K     mean token KL   loss        loss / loss(V)")
    loss_v = results["V"][0]
    for k, (loss, kl_N, _) in results.items():
        print(f"{k!s:<5} {float(kl_N.mean()):.6f}        {loss:.6f}    {loss / loss_v:.4f}")
    kl20, kl50 = results[K_SMALL][1].double(), results[K_LARGE][1].double()
    gap = (kl20 - kl50).abs()
    print(
        f"per token |KL_20 - KL_50|: mean {float(gap.mean()):.6f} ({float(gap.mean() / kl50.mean()):.2%} of the mean "
        f"KL_50), max {float(gap.max()):.6f}; loss_20 / loss_50 = {results[K_SMALL][0] / results[K_LARGE][0]:.4f}"
    )
    g20, g50, gv = (results[k][2] for k in (K_SMALL, K_LARGE, "V"))
    print(
        f"gradient cosine: K20 vs K50 {_cos(g20, g50):.4f}, K20 vs V {_cos(g20, gv):.4f}, K50 vs V {_cos(g50, gv):.4f}"
    )


if __name__ == "__main__":
    main()
