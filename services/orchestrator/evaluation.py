"""Periodic validation during training: Avg@n on the validation split with the current weights."""

from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES
from services.contracts.orchestrator import EvalRecord
from services.rollout_worker.evaluation import eval_report, eval_tasks
from services.rollout_worker.pool import RolloutPool
from services.rollout_worker.seeds import derive_seed
from services.settings.tree import TurnOPDSettings


def eval_task_types(settings: TurnOPDSettings) -> list[str]:
    """The configured task types, or the six household types on `alfworld`."""
    if settings.rollout.task_types:
        return list(settings.rollout.task_types)
    return list(HOUSEHOLD_TASK_TYPES) if settings.rollout.env == "alfworld" else []


def evaluate(
    pool: RolloutPool, settings: TurnOPDSettings, step: int, weights_version: int, cumulative_s: float
) -> EvalRecord:
    """Play the fixed validation games (``eval.seed``) ``val_n`` times each; Avg@n per task type."""
    cfg = settings.eval
    types = eval_task_types(settings)
    tasks = eval_tasks(settings.rollout.env, cfg.split, cfg.episodes, cfg.val_n, cfg.seed, types)
    result = pool.play(
        tasks,
        settings.rollout.max_turns,
        cfg.val_temperature,
        weights_version,
        seed=derive_seed("eval", cfg.seed),
        # as `turnopd eval` plays them: the same batches give the same greedy games as a shipped
        # manifest's measurement, and small batches keep long contexts cheap (one 30-episode batch
        # per worker pads every prompt to the longest and took twice as long on the demo)
        chunk_size=settings.rollout_worker.eval_chunk_episodes,
    )
    report = eval_report(
        tasks,
        result,
        model=settings.models.student,
        n=cfg.val_n,
        temperature=cfg.val_temperature,
        max_turns=settings.rollout.max_turns,
        seed=cfg.seed,
        task_types=types,
    )
    return EvalRecord(
        step=step,
        cumulative_s=cumulative_s,
        split=cfg.split,
        episodes=report.episodes,
        n=cfg.val_n,
        success_rate=report.success_rate,
        avg_at_n=report.avg_at_n,
        per_task_type={t: s.avg_at_n for t, s in report.per_task_type.items()},
    )
