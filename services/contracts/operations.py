"""Operating a live run: `turnopd status` and `turnopd restart`.  # cli <-> run-control actor <-> orchestrator

The `turnopd train` driver keeps a ``RunStatus`` in the named `run-control` actor and takes
``RestartRequest``s from it; the CLI reads the status and files requests, then waits for the
``RestartResult`` the driver writes back.
"""

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from services.contracts.base import Contract, FiniteFloat, NonNegInt, Probability
from services.contracts.orchestrator import EvalRecord, PoolLoad, SourceStepMetrics

RESTARTABLE = (
    "rollout-worker-{i}",
    "rollout-pool",
    "teacher",
    "teacher-<name>",
    "env-gateway",
    "controller",
    "learner",
    "redis",
)
_SERVICE_NAME = re.compile(
    r"^(rollout-worker-(0|[1-9][0-9]*)|rollout-pool|teacher(-[A-Za-z0-9][A-Za-z0-9._-]*)?|env-gateway|controller|learner|redis)$"
)

SCALABLE = {"rollout": "rollout-pool", "teacher": "teacher"}  # `turnopd scale POOL N` -> the service
_TEACHER_APP = re.compile(r"^teacher-[A-Za-z0-9][A-Za-z0-9._-]*$")  # a multi-teacher run's apps scale by name


def is_scalable(service: str) -> bool:
    return service in SCALABLE.values() or bool(_TEACHER_APP.match(service))


Health = Literal["ok", "busy", "restarting", "down", "unknown"]
RunPhase = Literal["starting", "training", "evaluating", "finished", "failed"]


def scale_service(pool: str, replicas: int) -> str:
    """The service `turnopd scale POOL N` resizes, else ValueError saying what is wrong."""
    if pool not in SCALABLE and not _TEACHER_APP.match(pool):
        raise ValueError(f"unknown pool {pool!r}; one of: {', '.join(SCALABLE)}, teacher-<name>")
    if replicas < 1:
        raise ValueError(f"a pool needs at least 1 replica, not {replicas}")
    return SCALABLE.get(pool, pool)


def check_service_name(name: str) -> str:
    """``name`` if it names a restartable service, else ValueError listing the names."""
    if not _SERVICE_NAME.match(name):
        raise ValueError(f"unknown service {name!r}; one of: {', '.join(RESTARTABLE)}")
    return name


class RestartRequest(Contract):
    """Replace one service of the live run with a fresh process.  # cli -> run-control -> orchestrator"""

    request_id: str = Field(min_length=1, description="Unique id the CLI waits on.")
    service: str = Field(description="rollout-worker-{i}, rollout-pool, teacher, env-gateway, ...")
    config_path: str | None = Field(
        None, min_length=1, description="TOML the new process starts with (None: the run's config)."
    )
    replicas: int | None = Field(
        None,
        ge=1,
        description="`turnopd scale`: resize the pool (service rollout-pool, teacher or teacher-<name>) to this many; "
        "nothing is restarted.",
    )

    @field_validator("service")
    @classmethod
    def _known(cls, value: str) -> str:
        return check_service_name(value)

    @model_validator(mode="after")
    def _scales_a_pool(self) -> "RestartRequest":
        if self.replicas is not None:
            if not is_scalable(self.service):
                raise ValueError(
                    f"only the pools {', '.join(SCALABLE)} (teacher-<name> in a multi-teacher run) can be "
                    f"scaled, not {self.service!r}"
                )
            if self.config_path is not None:
                raise ValueError("a scale request takes no config")
        return self


class RestartResult(Contract):
    """How a restart went.  # orchestrator -> run-control -> cli"""

    request_id: str = Field(min_length=1)
    service: str = Field(min_length=1)
    ok: bool
    message: str = Field(description="What was replaced, or why it failed (one line).")
    started_at: FiniteFloat = Field(ge=0.0, description="Unix time the driver began the restart.")
    seconds: FiniteFloat = Field(ge=0.0, description="Wall time of the restart itself.")
    step: NonNegInt = Field(description="Optimizer steps completed when the restart began.")


class ServiceStatus(Contract):
    """One service of the run as `turnopd status` shows it.  # orchestrator/cli -> operator"""

    name: str = Field(min_length=1, description="Service name, e.g. 'rollout-worker-0' or 'teacher'.")
    health: Health
    restarts: NonNegInt = Field(description="Replacements by `turnopd restart` plus crashes Ray recovered.")
    version: str = Field(description="What the process runs: weights version, config hash, model.")
    address: str | None = Field(None, description="Where it listens, when it is an HTTP service.")
    detail: str = Field("", description="Pid, state, or what the health check said.")


class RunStatus(Contract):
    """The live state of a `turnopd train` run.  # orchestrator -> run-control -> turnopd status"""

    run_id: str = Field(min_length=1)
    run_dir: str = Field(min_length=1)
    method: str = Field(min_length=1)
    phase: RunPhase
    step: NonNegInt = Field(description="Optimizer steps completed.")
    total_steps: int = Field(ge=1)
    h_hat: int | None = Field(None, ge=1, description="Applied depth of the last step.")
    h_bar: FiniteFloat | None = Field(None, description="EMA horizon after the last step.")
    alpha: Probability | None = Field(None, description="Loss blend of the last step.")
    weights_version: NonNegInt = Field(0, description="Weights version the rollout pool holds.")
    last_step_s: FiniteFloat | None = Field(None, ge=0.0, description="Wall time of the last step.")
    pool_load: PoolLoad | None = Field(
        None, description="How busy each pool was during the last step (None: not recorded yet)."
    )
    weights_lag: NonNegInt | None = Field(
        None, description="Versions the last step's rollout weights were behind the weights it updated."
    )
    last_eval: EvalRecord | None = None
    sources: list[SourceStepMetrics] | None = Field(
        None,
        description="Each task source's part of the last step (a multi-environment run); None: one source.",
    )
    source_evals: list[EvalRecord] = Field(
        default_factory=list, description="The last eval of each task source (a multi-environment run)."
    )
    services: list[ServiceStatus] = Field(default_factory=list)
    restarts: list[RestartResult] = Field(default_factory=list, description="Restarts done, oldest first.")
    updated_at: FiniteFloat = Field(ge=0.0, description="Unix time of this snapshot.")


class WorkerHealth(Contract):
    """A rollout worker's answer to a ping (served beside a running ``play``).  # rollout_worker -> cli"""

    name: str = Field(min_length=1)
    pid: int = Field(ge=1, description="Process id of the actor (for operators and the chaos test).")
    weights_version: NonNegInt
    playing: bool = Field(description="A rollout request is running right now.")


class ControllerHealth(Contract):
    """The controller's answer to a ping.  # controller -> cli"""

    step: NonNegInt = Field(description="Last step folded into the controller state.")
    h_bar: FiniteFloat
    redis_ok: bool = Field(description="Redis answered PING just now.")
    redis_error: str = Field("", description="Why Redis did not answer.")
    pid: int = Field(ge=1)
    rebuilt_steps: NonNegInt = Field(
        0,
        description="Steps the controllers put back into Redis from the run's records since this actor "
        "started (Redis had lost them).",
    )
    rebuilt: str = Field("", description="The last such rebuild, in words (empty: none).")
