"""Settings of the rollout worker pool (section ``[rollout_worker]``); pool size is ``cluster.rollout_workers``."""

from pydantic import Field

from services.settings_section import Section


class RolloutWorkerSettings(Section):
    num_cpus: float = Field(
        1.0, gt=0.0, description="CPUs Ray reserves per rollout worker (its torch threads)."
    )
    max_attempts: int = Field(
        3, ge=1, le=100, description="Plays of one batch of tasks before its episodes are reported failed."
    )
    restart_timeout_s: float | None = Field(
        None,
        gt=0.0,
        description="How long to wait for Ray to restart a dead worker (and reload weights). Unset: as "
        "ready_timeout_s, 300 s on the transformers engine and 900 s on vLLM.",
    )
    ready_timeout_s: float | None = Field(
        None,
        gt=0.0,
        description="How long new workers (the pool's start, a scale-up) may take to load. Unset: 300 s on "
        "the transformers engine, 900 s on vLLM, whose CPU build took 60-180 s to start here (import, "
        "engine-core process, compile warm-up) with Ray and the teacher starting beside it on 2 cores.",
    )
    env_timeout_s: float = Field(300.0, gt=0.0, description="Timeout of one env gateway HTTP call.")
    chunk_timeout_s: float | None = Field(
        3600.0,
        gt=0.0,
        description="The longest one worker call (a chunk of episodes) may play. A worker past it is "
        "alive but hung (an env call or its engine never returning): it is killed, Ray restarts it, "
        "and the chunk is played again (max_attempts plays in all). Unset: no deadline.",
    )
    eval_chunk_episodes: int = Field(
        8,
        ge=1,
        description="Evaluation (`turnopd eval` and a run's own): episodes per worker call (progress "
        "granularity vs batch size).",
    )
