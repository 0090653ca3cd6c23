"""Settings of the learner (Ray Train workers with FSDP2; one CPU worker: a plain actor)."""

from typing import Literal

from pydantic import Field

from services.settings_section import Section

DEFAULT_LOGITS_CHUNK_TOKENS = 1024


class LearnerSettings(Section):
    dtype: Literal["float32", "bfloat16"] = Field(
        "float32",
        description="Compute dtype of the student; parameters, gradient reduction and AdamW stay float32 "
        "(bfloat16: FSDP2 mixed precision).",
    )
    num_cpus_per_worker: float = Field(1.0, gt=0.0, description="Logical CPUs each learner worker reserves.")
    threads_per_worker: int | None = Field(
        None,
        ge=1,
        description="torch CPU threads of each worker's passes. Unset: Ray's count, the reserved CPUs or "
        "1 for a share under one CPU. A synchronous step on a small machine can give the learner every "
        "core, since it trains while the rollouts and the teacher wait.",
    )
    token_budget: int = Field(8192, ge=1, description="Max padded tokens (rows x length) per micro-batch.")
    pass_overhead_tokens: int = Field(
        0,
        ge=0,
        description="Fixed cost of a forward/backward pass in tokens: rows of different lengths share a "
        "padded micro-batch only where that saves more than it pads. 0 on CPU, where a pass has no "
        "fixed cost worth padding for (bench/padded_passes.py); larger on a GPU.",
    )
    logits_chunk_tokens: int = Field(
        DEFAULT_LOGITS_CHUNK_TOKENS,
        ge=1,
        description="Supervised positions whose LM-head logits (x vocabulary) are computed at once.",
    )
    checkpoint_every: int = Field(10, ge=1, description="Save a checkpoint every N optimizer steps.")
    keep_checkpoints: int = Field(
        2,
        ge=1,
        description="How many recent checkpoints of logged steps to keep on disk (the driver prunes "
        "after logging a step; a checkpoint of a step not logged yet is kept too).",
    )
    step_timeout_s: float = Field(1800.0, gt=0.0, description="Max seconds to wait for one optimizer step.")
    max_restarts: int = Field(
        3,
        ge=0,
        description="Times a run restarts a lost learner (a rank or its process killed, its node or "
        "mailbox gone) from the latest checkpoint, as --resume would, before it stops with the resume "
        "hint; the steps since that checkpoint are played again.",
    )
    ray_train_for_one_worker: bool = Field(
        False,
        description="Run a one-worker CPU learner on Ray Train too. Off: it runs as one plain actor, "
        "the same train loop without Ray Train's controller, placement-group cleaner and "
        "synchronisation actor (about 8 CPU-seconds less a start). More workers or a GPU: Ray Train.",
    )
