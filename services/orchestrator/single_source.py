"""One source of a multi-environment run as a run of its own: the baseline a multi-environment run
is measured against (``bench/multi_env.py``).

The single run plays the source's env with its teacher, depth, blend, turn cap and observation
format, on its share of the batch (``source_counts``), for the same number of steps; with the same
seed it draws the very tasks the source draws in the multi-environment run (``mixed_step_tasks``),
and is evaluated on the source's eval split. It makes the multi-environment run's optimiser updates
a step (``[optim] mini_batches``) where its smaller batch allows, else one per trajectory.
"""

from typing import Any

from services.orchestrator.tasks import source_counts
from services.settings.tree import TurnOPDSettings


def single_source_overrides(settings: TurnOPDSettings, env: str) -> dict[str, dict[str, Any] | list[Any]]:
    """Overrides of ``load_settings`` that turn the multi-environment run ``settings`` into a run of
    its source ``env`` alone; InputError naming the sources if none plays ``env``."""
    source = settings.task_source(env)
    sources = settings.task_sources()
    counts = source_counts([s.share for s in sources], settings.optim.batch)
    batch = dict(zip([s.env for s in sources], counts, strict=True))[env]
    if source.split != "train":
        raise ValueError(
            f"source {env!r} trains on split {source.split!r}; a run of one source trains on 'train'"
        )
    if batch == 0:
        raise ValueError(f"source {env!r} gets no trajectory of a batch of {settings.optim.batch}")
    return {
        "sources": [],
        "models": {"teacher": source.teacher},
        "rollout": {
            "env": source.env,
            "task_types": list(source.task_types),
            "max_turns": source.max_turns,
            "task_reminder": source.task_reminder,
        },
        "eval": {"split": source.eval_split},
        # as many optimiser updates a step as the multi-environment run makes, where the batch allows
        "optim": {"batch": batch, "mini_batches": min(settings.optim.mini_batches, batch)},
        "depth": source.depth.model_dump(),
        "blend": source.blend.model_dump(),
    }
