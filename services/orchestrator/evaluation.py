"""The evaluator part of the step loop: Avg@n on each task source's validation split with the
current weights (one source: ``[rollout] env`` on ``[eval] split``)."""

import logging
from collections import Counter
from dataclasses import dataclass

from services.contracts.env_gateway import HOUSEHOLD_TASK_TYPES
from services.contracts.orchestrator import EvalRecord
from services.rollout_worker.evaluation import eval_report, eval_tasks
from services.rollout_worker.pool import RolloutPool
from services.rollout_worker.seeds import derive_seed
from services.settings.task_mix import TaskSource
from services.settings.tree import EvalSettings, TurnOPDSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalPlan:
    """The evaluator's piece of the settings."""

    eval: EvalSettings
    sources: tuple[TaskSource, ...]
    multi_source: bool  # [[sources]] set: each record names its env, each source its own format
    student: str  # the model the reports name
    chunk_episodes: int  # [rollout_worker] eval_chunk_episodes

    @classmethod
    def of(cls, settings: TurnOPDSettings, sources: tuple[TaskSource, ...]) -> "EvalPlan":
        return cls(
            settings.eval,
            sources,
            bool(settings.sources),
            settings.models.student,
            settings.rollout_worker.eval_chunk_episodes,
        )


def eval_task_types(source: TaskSource) -> list[str]:
    """The source's task types, or the six household types on `alfworld`."""
    if source.task_types:
        return list(source.task_types)
    return list(HOUSEHOLD_TASK_TYPES) if source.env == "alfworld" else []


def evaluate(
    pool: RolloutPool, plan: EvalPlan, step: int, weights_version: int, cumulative_s: float
) -> list[EvalRecord]:
    """Every source's validation: its fixed games (``eval.seed``) ``val_n`` times each, Avg@n per
    task type; a record per source (``env`` set in a multi-environment run)."""
    return [
        evaluate_source(pool, plan, source, step, weights_version, cumulative_s) for source in plan.sources
    ]


def evaluate_source(
    pool: RolloutPool,
    plan: EvalPlan,
    source: TaskSource,
    step: int,
    weights_version: int,
    cumulative_s: float,
) -> EvalRecord:
    cfg = plan.eval
    types = eval_task_types(source)
    tasks = eval_tasks(source.env, source.eval_split, cfg.episodes, cfg.val_n, cfg.seed, types)
    if plan.multi_source:  # each source in its own observation format
        tasks = [t.model_copy(update={"task_reminder": source.task_reminder}) for t in tasks]
    result = pool.play(
        tasks,
        source.max_turns,
        cfg.val_temperature,
        weights_version,
        seed=derive_seed("eval", cfg.seed),
        # as `turnopd eval` plays them: the same batches give the same greedy games as a shipped
        # manifest's measurement, and small batches keep long contexts cheap (one 30-episode batch
        # per worker pads every prompt to the longest and took twice as long on the demo)
        chunk_size=plan.chunk_episodes,
    )
    report = eval_report(
        tasks,
        result,
        model=plan.student,
        n=cfg.val_n,
        temperature=cfg.val_temperature,
        max_turns=source.max_turns,
        seed=cfg.seed,
        task_types=types,
    )
    if report.failed_episodes:
        reasons = Counter(f.reason for f in result.failures)
        log.warning(
            "evaluation after step %d%s: %d of %d episodes could not be played (%s), counted as "
            "failures; the success rate understates the model (failed_episodes in eval.jsonl); e.g. %s",
            step,
            f" ({source.env})" if plan.multi_source else "",
            report.failed_episodes,
            report.episodes,
            ", ".join(f"{n} {why}" for why, n in reasons.items()) or "no trajectory",
            result.failures[0].error if result.failures else "no trajectory returned",
        )
    return EvalRecord(
        step=step,
        cumulative_s=cumulative_s,
        split=source.eval_split,
        episodes=report.episodes,
        n=cfg.val_n,
        success_rate=report.success_rate,
        avg_at_n=report.avg_at_n,
        per_task_type={t: s.avg_at_n for t, s in report.per_task_type.items()},
        env=source.env if plan.multi_source else None,
        failed_episodes=report.failed_episodes or None,
    )
